// service: a systemd unit made to match (enabled, state, restart_on, a unit file the mesh writes), read back
// after the daemon-reload that loads it; undeclared, given back as it was found, never simply stopped.

import {
  type FoundFile,
  isAbsent,
  isActive,
  isEnabled,
  readRegular,
  showUnit,
  type UnitState,
  unitPath,
  unitsProblem,
  writeRegular,
} from "../../system/arch/index.ts";
import { sha256 } from "../../system/index.ts";
import type { ServiceResource } from "../../vocabulary/index.ts";
import { unitNameProblem } from "../../vocabulary/index.ts";
import { executeBy, failedKeeping, failsAgain, stepsOf, thrownLine } from "../step.ts";
import type { Applier, DecideContext, Executed, Executors, Found, StepOf } from "../types.ts";
import {
  foundLine,
  type GiveBack,
  giveBack,
  planGiveBack,
  reloadRunShow,
  type ServiceFound,
  ServiceRecord,
} from "./give-back.ts";

export type { ServiceFound, ServiceRecord } from "./give-back.ts";

interface Write {
  content: string;
  sha: string;
  created: boolean;
  /** What was there, kept as the original before it is overwritten. */
  hold?: FoundFile;
}

interface ApplyData {
  unit: string;
  record: ServiceRecord;
  /**
   * The record as it will be once the file is written: what an apply may journal before executing, so a crash
   * between the write and the save cannot make the mesh's own file look found (nor lose what was found).
   */
  intent: ServiceRecord;
  write?: Write;
  /** A file found already as declared the first time: taken over, its original held all the same. */
  adopt?: FoundFile;
  reload: boolean;
  verbs: string[];
  /** The unit this id named before, given back first when a declaration moves it to another. */
  moved?: GiveBack;
}

/** The service applier's steps, keyed by action: each executor below is handed its own. */
export type ServiceStep =
  | StepOf<"apply", ApplyData>
  | StepOf<"give-back", GiveBack>
  | StepOf<"fail" | "refuse">;

const step = stepsOf<ServiceStep>("service");

/**
 * Adopted mode's input: a unit found running is the host's, held (apply/adopted.ts) until a declaration takes
 * it; once held it stays held, whatever it does since. One the mesh already manages, or found stopped, is not.
 * The hold keeps what was found, so a unit taken later is given back as it was when first held.
 */
async function foundRunning(
  wanted: ServiceResource,
  ctx: DecideContext,
  held: ServiceRecord | undefined,
): Promise<Found<ServiceRecord> | false> {
  const { unit } = wanted;
  const detail = `${unit} held: found running on this adopted node (takes: true makes it the mesh's)`;
  if (held) return { record: held, detail };
  const now = await showUnit(ctx.ports.exec, unit);
  if (typeof now === "string" || !isActive(now.active)) return false;
  const found = { load: now.load, enabled: now.file, active: now.active };
  return { record: { type: "service", unit, held: true, found }, detail };
}

/** The record after this apply: what was found is the earlier record's, plus what is found now for the first time. */
function nextFound(
  wanted: ServiceResource,
  kept: ServiceRecord | undefined,
  now: UnitState,
): ServiceFound | undefined {
  // a record from before Found existed stays without one: its unit is left alone on the way out
  if (kept && !kept.found) return undefined;
  const found: ServiceFound = { ...(kept?.found ?? { load: now.load }) };
  if (wanted.enabled !== undefined && found.enabled === undefined) found.enabled = now.file;
  if (wanted.state !== undefined && found.active === undefined) found.active = now.active;
  return found;
}

/** What has to be written, or why the file cannot be managed. */
function planWrite(
  wanted: ServiceResource,
  kept: ServiceRecord | undefined,
  file: FoundFile | null | undefined,
): Write | undefined {
  if (wanted.content === undefined) return undefined;
  const sha = sha256(Buffer.from(wanted.content, "utf8"));
  if (file && file.sha === sha) return undefined;
  // the first content found is the original; one changed by hand since the mesh wrote over it is kept beside it
  const hold =
    file && (!kept?.file || (!kept.file.created && file.sha !== kept.file.wrote)) ? file : undefined;
  return { content: wanted.content, sha, created: kept?.file?.created ?? file === null, hold };
}

/** The systemctl verbs, in order, that take the unit from `now` to what is declared. */
function planVerbs(
  wanted: ServiceResource,
  now: UnitState,
  contentChanged: boolean,
  triggers: string[],
): string[] {
  const verbs: string[] = [];
  if (wanted.enabled === true && !isEnabled(now.file)) verbs.push("enable");
  if (wanted.enabled === false && isEnabled(now.file)) verbs.push("disable");
  // a running unit whose file changed still runs the old one until it is restarted
  const restart = triggers.length > 0 || (contentChanged && !isAbsent(now) && isActive(now.active));
  if (wanted.state === "running") verbs.push(!isActive(now.active) ? "start" : restart ? "restart" : "");
  else if (wanted.state === "stopped") verbs.push(isActive(now.active) ? "stop" : "");
  else if (restart && isActive(now.active)) verbs.push("try-restart");
  return verbs.filter(Boolean);
}

function describe(
  unit: string,
  write: Write | undefined,
  reload: boolean,
  verbs: string[],
  triggers: string[],
): string {
  const parts: string[] = [];
  if (write) parts.push(`write ${unitPath(unit)}${write.hold ? " (the original held)" : ""}`);
  if (reload) parts.push("daemon-reload");
  parts.push(
    ...verbs.map((v) =>
      v.endsWith("restart") && triggers.length ? `${v} (${triggers.join(", ")} changed)` : v,
    ),
  );
  return parts.join(", ");
}

/** One executor per action of ServiceStep. */
const executors: Executors<ServiceStep, ServiceResource, ServiceRecord> = {
  apply: async (s, _wanted, record, ctx) => applyUnit(s, s.data, record, ctx),
  "give-back": async (s, _wanted, record, ctx) => {
    const done = await giveBack(s.data, ctx);
    return {
      did: done.ok ? s.did : "failed",
      detail: done.detail,
      record: done.ok ? null : (record ?? null),
    };
  },
  fail: failsAgain,
  refuse: failsAgain,
};

export const serviceApplier: Applier<ServiceResource, ServiceRecord, ServiceStep> = {
  recordSchema: ServiceRecord,
  type: "service",
  traits: {
    // `restart_on`
    readsChanges: () => true,
    found: foundRunning,
    heldAs: (record) => (record.held ? record.unit : undefined),
    sameAs: (record, wanted) => record.unit === wanted.unit,
  },

  async decide(wanted, record, ctx) {
    const { id, unit } = wanted;
    const problem = unitNameProblem(unit);
    if (problem) return step(id, "failed", "refuse", `unit ${problem}`, undefined, "unit");
    // the same id moved to another unit: the old one is given back, the new one found afresh
    const movedPlan = record && record.unit !== unit ? await planGiveBack(id, record, ctx) : undefined;
    if (typeof movedPlan === "string") return step(id, "failed", "fail", movedPlan);
    const moved = movedPlan;
    const kept = moved ? undefined : record;
    const now = await showUnit(ctx.ports.exec, unit);
    if (typeof now === "string") return step(id, "failed", "fail", now);
    const file = wanted.content === undefined ? undefined : await readRegular(ctx.ports.root, unitPath(unit));
    if (typeof file === "string") return step(id, "failed", "fail", file);
    const write = planWrite(wanted, kept, file);
    if (isAbsent(now) && !write)
      return step(
        id,
        "failed",
        "fail",
        `${unit} is not installed (LoadState=not-found): absent, which is not stopped`,
      );
    if (now.load === "masked" && (wanted.state === "running" || wanted.enabled))
      return step(id, "failed", "fail", `${unit} is masked; the mesh does not unmask it`);
    const reload = write !== undefined || (wanted.content !== undefined && now.needReload);
    const triggers = (wanted.restart_on ?? []).filter((other) => ctx.changed.has(other));
    const verbs = planVerbs(wanted, now, write !== undefined, triggers);
    const declared = {
      enabled: wanted.enabled,
      state: wanted.state,
      content: wanted.content === undefined ? undefined : sha256(Buffer.from(wanted.content)),
    };
    const found = nextFound(wanted, kept, now);
    const fileRec = write
      ? undefined
      : file
        ? { created: kept?.file?.created ?? false, wrote: file.sha }
        : kept?.file;
    const next: ServiceRecord = {
      type: "service",
      unit,
      ...(found ? { found } : {}),
      ...(fileRec ? { file: fileRec } : {}),
      declared,
    };
    const adopt = !write && file && !kept?.file ? file : undefined;
    const intent = write ? { ...next, file: { created: write.created, wrote: write.sha } } : next;
    const data: ApplyData = { unit, record: next, intent, write, adopt, reload, verbs, moved };
    // a held unit taken now is touched for the first time: what was found when it was held is said
    const firstTouch = found && (!kept || kept.held) ? `; ${foundLine(found)}` : "";
    const movedLine = moved ? `${moved.detail}; then ` : "";
    if (!write && !reload && verbs.length === 0 && !moved)
      return step(id, "unchanged", "apply", `${unit} is as declared${firstTouch}`, data);
    const what = `${movedLine}${unit}: ${describe(unit, write, reload, verbs, triggers)}${firstTouch}`;
    const onlyTriggered =
      !write && !reload && verbs.every((v) => v.endsWith("restart")) && triggers.length > 0;
    const sameAsBefore = kept?.declared && JSON.stringify(kept.declared) === JSON.stringify(declared);
    const did = isAbsent(now) ? "created" : sameAsBefore && !onlyTriggered && !moved ? "repaired" : "updated";
    return step(id, did, "apply", what, data);
  },

  async decideRemoval(id, record, ctx) {
    const problem = unitNameProblem(record.unit);
    if (problem)
      return step(
        id,
        "failed",
        "refuse",
        `the record names unit "${record.unit}", which ${problem}; nothing was touched`,
        undefined,
        "unit",
      );
    const plan = await planGiveBack(id, record, ctx);
    if (typeof plan === "string") return step(id, "failed", "fail", plan);
    return step(id, plan.did, "give-back", plan.detail, plan);
  },

  execute: executeBy(executors),
};

/** The unit this id named before (moved to another unit), given back first: the failure of that, or null. */
async function movedBack(
  moved: GiveBack | undefined,
  old: ServiceRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<ServiceRecord> | null> {
  if (!moved) return null;
  const back = await giveBack(moved, ctx);
  return back.ok ? null : failedKeeping(back.detail, old);
}

/** Carry out a decided apply. The record (with what was found) is returned whatever fails, so it is never lost. */
async function applyUnit(
  s: ServiceStep,
  data: ApplyData,
  old: ServiceRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<ServiceRecord>> {
  const { exec, root, originals } = ctx.ports;
  const { unit } = data;
  const record: ServiceRecord = { ...data.record };
  const failed = (why: string): Executed<ServiceRecord> => ({
    did: "failed",
    detail: `${unit}: ${why}`,
    record,
  });
  try {
    const movedFailed = await movedBack(data.moved, old, ctx);
    if (movedFailed) return movedFailed;
    // systemd's verdict on the new file before it replaces the one it runs: refused, nothing is touched
    if (data.write) {
      const why = await unitsProblem(root, exec, { [unit]: data.write.content });
      if (why) return failed(`${why}; the unit file was not replaced`);
    }
    const path = unitPath(unit);
    const hold = data.write?.hold ?? data.adopt;
    if (hold) await originals.keep(path, hold.bytes, hold);
    if (data.write) {
      await writeRegular(root, path, Buffer.from(data.write.content, "utf8"));
      record.file = { created: data.write.created, wrote: data.write.sha };
    }
    // the unit is read only after the reload that loads what was just written
    const back = await reloadRunShow(exec, unit, data.reload, data.verbs);
    if (typeof back === "string") return failed(back);
    const wrong = readBackProblem(back, data.record.declared ?? {});
    if (wrong) return failed(`read back ${wrong}`);
    return {
      did: s.did,
      detail: `${s.detail}; read back ${back.load}, ${back.file || "no file state"}, ${back.active} (${back.sub})`,
      record,
    };
  } catch (e) {
    return failed(thrownLine(e));
  }
}

/** Why the unit as read back is not what was declared, or null. */
function readBackProblem(back: UnitState, declared: NonNullable<ServiceRecord["declared"]>): string | null {
  if (isAbsent(back)) return "LoadState=not-found";
  if (back.needReload) return "NeedDaemonReload=yes: systemd has not loaded the file on disk";
  if (declared.state === "running" && !(back.active === "active" || back.active === "reloading"))
    return `ActiveState=${back.active} (${back.sub}), declared running`;
  if (declared.state === "stopped" && isActive(back.active))
    return `ActiveState=${back.active}, declared stopped`;
  if (declared.enabled === true && !isEnabled(back.file))
    return `UnitFileState=${back.file || "(none)"}, declared enabled`;
  if (declared.enabled === false && isEnabled(back.file))
    return `UnitFileState=${back.file}, declared disabled`;
  return null;
}
