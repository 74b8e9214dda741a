// process: a program the mesh runs from files it ships (its bundle, under /var/lib/mesh/<name>), as a daemon
// or on a schedule (a timer and a oneshot service). Undeclared, its unit, timer and bundle are removed: the
// paths derive from the name alone, the name held to the one rule again first (a record naming ".." once
// made the removal delete /var/lib/mesh whole).
import { createHash } from "node:crypto";
import { basename } from "node:path";
import { BUNDLE_FILE_MODE, DEFAULT_FILE_MODE } from "../../defaults.ts";
import {
  calendarProblem,
  isAbsent,
  isActive,
  isEnabled,
  readRegular,
  showUnit,
  type UnitState,
  unitPath,
} from "../../system/arch/index.ts";
import { entryAt, octal, placeProblem, sha256 } from "../../system/index.ts";
import { bundlePathProblem, nameProblem, type ProcessResource } from "../../vocabulary/index.ts";
import { executeBy, failsAgain, stepsOf, thrownLine } from "../step.ts";
import type { Applier, DecideContext, Executed, Executors, Found } from "../types.ts";
import {
  type ApplyData,
  applyProcess,
  type FileWrite,
  type ProcessStep,
  type RemoveData,
  removeProcess,
} from "./process-run.ts";
import { bundleDir, ProcessRecord, renderUnits, serviceUnit, timerUnit } from "./process-units.ts";

export type { ProcessStep } from "./process-run.ts";
export {
  BUNDLE_ROOT,
  bundleDir,
  type ProcessRecord,
  renderUnits,
  serviceUnit,
  timerUnit,
} from "./process-units.ts";

const step = stepsOf<ProcessStep>("process");

const digestOf = (p: ProcessResource): string => {
  const { id: _id, ...rest } = p;
  return createHash("sha256").update(JSON.stringify(rest)).digest("hex");
};

/**
 * Adopted mode's input: a process found running under its units (its timer, if scheduled) is the host's, held
 * (apply/adopted.ts) until a declaration takes it; once held it stays held, whatever it does since. A schedule
 * systemd refuses is refused by its decision first, held or not.
 */
async function foundRunning(
  wanted: ProcessResource,
  ctx: DecideContext,
  held: ProcessRecord | undefined,
): Promise<Found<ProcessRecord> | false> {
  const { name } = wanted;
  const { exec } = ctx.ports;
  const scheduled = wanted.schedule !== undefined;
  if (scheduled && (await calendarProblem(exec, wanted.schedule!))) return false;
  const unit = scheduled ? timerUnit(name) : serviceUnit(name);
  const detail = `${unit} held: found running on this adopted node (takes: true makes it the mesh's)`;
  const record: ProcessRecord = {
    type: "process",
    name,
    scheduled,
    bundle: {},
    declared: digestOf(wanted),
    held: true,
  };
  if (held) return { record, detail };
  const now = await showUnit(exec, unit);
  if (typeof now === "string" || now.load !== "loaded" || !isActive(now.active)) return false;
  return { record, detail };
}

/** Why any name or path this process would touch breaks the rule, or null. */
function ruleProblem(p: {
  name: string;
  bundle?: { path: string }[];
}): { field: string; reason: string } | null {
  const name = nameProblem(p.name);
  if (name) return { field: "name", reason: `name "${p.name}" ${name}` };
  for (const [i, f] of (p.bundle ?? []).entries()) {
    const problem = bundlePathProblem(f.path);
    if (problem) return { field: `bundle.${i}.path`, reason: `bundle path "${f.path}" ${problem}` };
  }
  return null;
}

/** The verbs that leave the process running as declared, given what systemd says now and whether anything changed. */
function startVerbs(
  p: ProcessResource,
  svc: UnitState,
  timer: UnitState | null,
  changed: boolean,
): string[][] {
  const verbs: string[][] = [];
  if (p.schedule !== undefined) {
    const t = timerUnit(p.name);
    if (!timer || !isEnabled(timer.file)) verbs.push(["enable", t]);
    if (!timer || !isActive(timer.active)) verbs.push(["start", t]);
    else if (changed) verbs.push(["restart", t]);
    return verbs;
  }
  const s = serviceUnit(p.name);
  if (!isEnabled(svc.file)) verbs.push(["enable", s]);
  if (!isActive(svc.active)) verbs.push(["start", s]);
  else if (changed) verbs.push(["restart", s]);
  return verbs;
}

/** Every file the process is run by (its units, its bundle), with the digest of what will be written. */
function filesOf(wanted: ProcessResource, rendered: Record<string, string>): FileWrite[] {
  return [
    ...Object.entries(rendered).map(([path, text]) => ({
      path,
      bytes: Buffer.from(text),
      mode: DEFAULT_FILE_MODE,
    })),
    ...(wanted.bundle ?? []).map((f) => ({
      path: `${bundleDir(wanted.name)}/${f.path}`,
      bytes: f.content !== undefined ? Buffer.from(f.content, "utf8") : Buffer.from(f.content_b64!, "base64"),
      mode: f.mode ? Number.parseInt(f.mode, 8) : BUNDLE_FILE_MODE,
    })),
  ].map((f) => ({ ...f, sha: sha256(f.bytes) }));
}

/** The files not on the machine as declared (absent, other content or mode), or why one cannot be read. */
async function writesOf(root: string, files: FileWrite[]): Promise<FileWrite[] | string> {
  const writes: FileWrite[] = [];
  for (const f of files) {
    const found = await readRegular(root, f.path);
    if (typeof found === "string") return found;
    if (!found || found.sha !== f.sha || found.mode !== f.mode) writes.push(f);
  }
  return writes;
}

/** What the apply step does, from what systemd says now and what is on disk; or why a file cannot be read. */
async function applyDataOf(
  wanted: ProcessResource,
  kept: ProcessRecord | undefined,
  previous: RemoveData | undefined,
  { svc, timer }: { svc: UnitState; timer: UnitState },
  ctx: DecideContext,
): Promise<ApplyData | string> {
  const { name } = wanted;
  const scheduled = wanted.schedule !== undefined;
  const rendered = renderUnits(wanted);
  const files = filesOf(wanted, rendered);
  const writes = await writesOf(ctx.ports.root, files);
  if (typeof writes === "string") return writes;
  const declaredBundle = new Set((wanted.bundle ?? []).map((f) => f.path));
  const stale = Object.keys(kept?.bundle ?? {})
    .filter((rel) => !declaredBundle.has(rel) && !bundlePathProblem(rel))
    .map((rel) => `${bundleDir(name)}/${rel}`);
  const hadTimer = !isAbsent(timer);
  const before: string[][] = [];
  // a daemon turned timer is stopped and unhooked from boot first (never a scheduled run under way)
  if (scheduled && !kept?.scheduled && (isEnabled(svc.file) || isActive(svc.active)))
    before.push(["disable", "--now", serviceUnit(name)]);
  if (!scheduled && hadTimer) before.push(["disable", "--now", timerUnit(name)]);
  if (!scheduled && hadTimer) stale.push(unitPath(timerUnit(name)));
  const unitsChanged =
    writes.some((w) => w.path.startsWith("/etc/")) || stale.some((p) => p.startsWith("/etc/"));
  const reload = unitsChanged || svc.needReload || timer.needReload;
  const changed = writes.length > 0 || stale.length > 0;
  const after = startVerbs(wanted, svc, hadTimer ? timer : null, changed);
  const bundle = Object.fromEntries(
    files
      .filter((f) => f.path.startsWith(`${bundleDir(name)}/`))
      .map((f) => [f.path.slice(bundleDir(name).length + 1), f.sha]),
  );
  const record: ProcessRecord = { type: "process", name, scheduled, bundle, declared: digestOf(wanted) };
  const intent = { ...record, bundle: { ...kept?.bundle, ...bundle } };
  const units = Object.fromEntries(Object.entries(rendered).map(([path, text]) => [basename(path), text]));
  return { intent, name, scheduled, previous, before, writes, units, removes: stale, reload, after, record };
}

/** The apply step in words, in the order it does things. */
function applyDetail(data: ApplyData): string {
  return [
    ...(data.previous ? [`remove process ${data.previous.name}`] : []),
    ...data.before.map((v) => v.join(" ")),
    ...data.writes.map((w) => `write ${w.path} ${octal(w.mode)}`),
    ...data.removes.map((p) => `remove ${p}`),
    ...(data.reload ? ["daemon-reload"] : []),
    ...data.after.map((v) => v.join(" ")),
  ].join(", ");
}

/** One executor per action of ProcessStep (execute below turns a throw into a failed step). */
const run = executeBy<ProcessStep, ProcessResource, ProcessRecord>({
  apply: (s, _wanted, record, ctx) => applyProcess(s, s.data, record, ctx),
  remove: (s, _wanted, record, ctx) => removeProcess(s.data, record, ctx),
  fail: failsAgain,
  refuse: failsAgain,
} satisfies Executors<ProcessStep, ProcessResource, ProcessRecord>);

export const processApplier: Applier<ProcessResource, ProcessRecord, ProcessStep> = {
  recordSchema: ProcessRecord,
  type: "process",
  traits: {
    found: foundRunning,
    heldAs: (record) => (record.held ? record.name : undefined),
    sameAs: (record, wanted) => record.name === wanted.name,
  },

  async decide(wanted, record, ctx) {
    const { id, name } = wanted;
    const { exec } = ctx.ports;
    const rule = ruleProblem(wanted);
    if (rule) return step(id, "failed", "refuse", rule.reason, undefined, rule.field);
    // renamed under the same id: the old process is removed first, as if undeclared (a held one is only dropped)
    const renamed = record !== undefined && record.name !== name;
    let previous: RemoveData | undefined;
    if (renamed && !record.held) {
      const gone = await processApplier.decideRemoval(id, record, ctx);
      if (gone.action !== "remove") return gone;
      previous = gone.data;
    }
    const kept = renamed ? undefined : record;
    // systemd itself judges the calendar, where it will run; refused before anything is touched
    if (wanted.schedule !== undefined) {
      const bad = await calendarProblem(exec, wanted.schedule);
      if (bad) return step(id, "failed", "refuse", `schedule: ${bad}`, undefined, "schedule");
    }
    const scheduled = wanted.schedule !== undefined;
    const svc = await showUnit(exec, serviceUnit(name));
    if (typeof svc === "string") return step(id, "failed", "fail", svc);
    const timer = await showUnit(exec, timerUnit(name));
    if (typeof timer === "string") return step(id, "failed", "fail", timer);
    const data = await applyDataOf(wanted, kept, previous, { svc, timer }, ctx);
    if (typeof data === "string") return step(id, "failed", "fail", data);
    const { before, writes, removes, reload, after } = data;
    if (!writes.length && !removes.length && !reload && !before.length && !after.length && !previous)
      return step(
        id,
        "unchanged",
        "apply",
        `${serviceUnit(name)}${scheduled ? ` on ${timerUnit(name)}` : ""} is as declared`,
        data,
      );
    const did =
      !record && isAbsent(svc) ? "created" : kept?.declared === data.record.declared ? "repaired" : "updated";
    return step(id, did, "apply", applyDetail(data), data);
  },

  async decideRemoval(id, record, ctx) {
    // a hand-edited records file is input too: held to the rule before anything is removed
    const rule = ruleProblem({
      name: record.name,
      bundle: Object.keys(record.bundle ?? {}).map((path) => ({ path })),
    });
    if (rule)
      return step(
        id,
        "failed",
        "refuse",
        `the record's ${rule.reason}; nothing was removed`,
        undefined,
        rule.field,
      );
    const { name } = record;
    const loaded: string[] = [];
    for (const unit of [timerUnit(name), serviceUnit(name)]) {
      const now = await showUnit(ctx.ports.exec, unit);
      if (typeof now === "string") return step(id, "failed", "fail", now);
      if (!isAbsent(now)) loaded.push(unit);
    }
    const stop = loaded.length ? `stop and disable ${loaded.join(", ")}; ` : "";
    // what the removal will not touch is decided here, so the plan says it and no apply fails on it for ever
    const leave = bundleLeft(ctx.ports.root, bundleDir(name));
    const paths = [
      unitPath(serviceUnit(name)),
      unitPath(timerUnit(name)),
      ...(leave ? [] : [bundleDir(name)]),
    ];
    const left = leave ? `; ${leave}: it is the operator's now` : "";
    return step(id, "removed", "remove", `${stop}remove what is there of ${paths.join(", ")}${left}`, {
      name,
      loaded,
      ...(leave ? { leave } : {}),
    });
  },

  async execute(s, wanted, record, ctx): Promise<Executed<ProcessRecord>> {
    try {
      return await run(s, wanted, record, ctx);
    } catch (e) {
      return {
        did: "failed",
        detail: thrownLine(e),
        // a write that failed half way: the record still names every file either apply may have written
        record: s.action === "apply" ? s.data.intent : (record ?? null),
      };
    }
  },
};

/**
 * Why the bundle directory at `path` is left by a removal, or null: a link (never followed) or something not a
 * directory is not the mesh's to delete. The removal then says so and drops the record, rather than failing
 * every apply on a thing it will not touch.
 */
function bundleLeft(root: string, path: string): string | null {
  const problem = placeProblem(root, path);
  if (problem) return `${problem}; it is left`;
  const entry = entryAt(root, path);
  if (typeof entry === "string") return `${entry}; it is left`;
  if (entry?.kind === "link") return `${path} is a symbolic link; it is left, not followed`;
  if (entry && entry.kind !== "directory") return `${path} is not a directory; it is left`;
  return null;
}
