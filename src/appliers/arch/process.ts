// process: a program the mesh runs from files it ships (its bundle, under /var/lib/mesh/<name>), as a daemon
// or on a schedule (a timer and a oneshot service). Undeclared, its unit, timer and bundle are removed: the
// paths derive from the name alone, the name held to the one rule again first (a record naming ".." once
// made the removal delete /var/lib/mesh whole).
import { createHash } from "node:crypto";
import { basename } from "node:path";
import { BUNDLE_FILE_MODE } from "../../defaults.ts";
import {
  calendarProblem,
  isAbsent,
  isActive,
  isEnabled,
  readRegular,
  removeRegular,
  removeTree,
  showUnit,
  systemctl,
  UNIT_DIR,
  type UnitState,
  unitPath,
  unitsProblem,
  writeRegular,
} from "../../system/arch/index.ts";
import { entryAt, octal, placeProblem, sha256 } from "../../system/index.ts";
import { bundlePathProblem, nameProblem, type ProcessResource } from "../../vocabulary/index.ts";
import { executeBy, failsAgain, stepsOf } from "../step.ts";
import type { Applier, DecideContext, Executed, Executors, StepOf } from "../types.ts";
import { bundleDir, type ProcessRecord, renderUnits, serviceUnit, timerUnit } from "./process-units.ts";

export {
  BUNDLE_ROOT,
  bundleDir,
  type ProcessRecord,
  renderUnits,
  serviceUnit,
  timerUnit,
} from "./process-units.ts";

interface FileWrite {
  path: string;
  bytes: Uint8Array;
  sha: string;
  mode: number;
}

interface RemoveData {
  name: string;
  /** Units systemd has loaded, to stop and disable. */
  loaded: string[];
  /** Why the bundle directory is left as it is (a link is never followed): given back to the operator. */
  leave?: string;
}

interface ApplyData {
  /** What an apply may journal before executing: every bundle file this or the last apply wrote. */
  intent: ProcessRecord;
  name: string;
  scheduled: boolean;
  /** The process this id named before, removed first. */
  previous?: RemoveData;
  /** Before anything is written: a daemon turned timer (or back) stops what it was. */
  before: string[][];
  writes: FileWrite[];
  /** Every unit the process runs by, by unit name: verified together before any of them is written. */
  units: Record<string, string>;
  /** Declared paths of files to remove: bundle files no longer declared, a timer no longer wanted. */
  removes: string[];
  reload: boolean;
  after: string[][];
  record: ProcessRecord;
}

interface HoldData {
  record: ProcessRecord;
  /** The process this id named before, removed first. */
  previous?: RemoveData;
}

/** The process applier's steps, keyed by action: each executor below is handed its own. */
export type ProcessStep =
  | StepOf<"apply", ApplyData>
  | StepOf<"remove", RemoveData>
  | StepOf<"hold", HoldData>
  | StepOf<"forget" | "fail" | "refuse">;

const step = stepsOf<ProcessStep>("process");

const digestOf = (p: ProcessResource): string => {
  const { id: _id, ...rest } = p;
  return createHash("sha256").update(JSON.stringify(rest)).digest("hex");
};

/**
 * On an adopted node a process found running under its units (its timer, if scheduled) is the host's, held
 * until a declaration takes it; once held it stays held, whatever it does since.
 */
function isHeld(
  wanted: ProcessResource,
  kept: ProcessRecord | undefined,
  running: UnitState,
  ctx: DecideContext,
): boolean {
  if (ctx.mode !== "adopted" || wanted.takes) return false;
  return kept ? kept.held === true : running.load === "loaded" && isActive(running.active);
}

/** Nothing written, no unit touched; an id renamed off a process of the mesh's still removes that one first. */
function holdStep(wanted: ProcessResource, unit: string, previous: RemoveData | undefined): ProcessStep {
  const { id, name } = wanted;
  const record: ProcessRecord = {
    type: "process",
    name,
    scheduled: wanted.schedule !== undefined,
    bundle: {},
    declared: digestOf(wanted),
    held: true,
  };
  const before = previous ? `remove process ${previous.name}, then ` : "";
  const detail = `${before}${unit} held: found running on this adopted node (takes: true makes it the mesh's)`;
  const data: HoldData = { record, previous };
  return step(id, previous ? "updated" : "unchanged", "hold", detail, data);
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

/** One executor per action of ProcessStep (execute below turns a throw into a failed step). */
const run = executeBy<ProcessStep, ProcessResource, ProcessRecord>({
  apply: (s, _wanted, record, ctx) => applyProcess(s, s.data, record, ctx),
  remove: (s, _wanted, record, ctx) => removeProcess(s.data, record, ctx),
  hold: (s, _wanted, record, ctx) => holdProcess(s, s.data, record, ctx),
  forget: async (s) => ({ did: s.did, detail: s.detail, record: null }),
  fail: failsAgain,
  refuse: failsAgain,
} satisfies Executors<ProcessStep, ProcessResource, ProcessRecord>);

export const processApplier: Applier<ProcessResource, ProcessRecord, ProcessStep> = {
  type: "process",

  async decide(wanted, record, ctx) {
    const { id, name } = wanted;
    const { root, exec } = ctx.ports;
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
    if (isHeld(wanted, kept, scheduled ? timer : svc, ctx))
      return holdStep(wanted, scheduled ? timerUnit(name) : serviceUnit(name), previous);
    const rendered = renderUnits(wanted);
    const files: FileWrite[] = [
      ...Object.entries(rendered).map(([path, text]) => ({
        path,
        bytes: Buffer.from(text),
        mode: 0o644,
      })),
      ...(wanted.bundle ?? []).map((f) => ({
        path: `${bundleDir(name)}/${f.path}`,
        bytes:
          f.content !== undefined ? Buffer.from(f.content, "utf8") : Buffer.from(f.content_b64!, "base64"),
        mode: f.mode ? Number.parseInt(f.mode, 8) : BUNDLE_FILE_MODE,
      })),
    ].map((f) => ({ ...f, sha: sha256(f.bytes) }));
    const writes: FileWrite[] = [];
    for (const f of files) {
      const found = await readRegular(root, f.path);
      if (typeof found === "string") return step(id, "failed", "fail", found);
      if (!found || found.sha !== f.sha || found.mode !== f.mode) writes.push(f);
    }
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
    const next: ProcessRecord = { type: "process", name, scheduled, bundle, declared: digestOf(wanted) };
    const intent = { ...next, bundle: { ...kept?.bundle, ...bundle } };
    const data: ApplyData = {
      intent,
      name,
      scheduled,
      previous,
      before,
      writes,
      units: Object.fromEntries(Object.entries(rendered).map(([path, text]) => [basename(path), text])),
      removes: stale,
      reload,
      after,
      record: next,
    };
    if (!changed && !reload && before.length === 0 && after.length === 0 && !previous)
      return step(
        id,
        "unchanged",
        "apply",
        `${serviceUnit(name)}${scheduled ? ` on ${timerUnit(name)}` : ""} is as declared`,
        data,
      );
    const parts = [
      ...(previous ? [`remove process ${previous.name}`] : []),
      ...before.map((v) => v.join(" ")),
      ...writes.map((w) => `write ${w.path} ${octal(w.mode)}`),
      ...stale.map((p) => `remove ${p}`),
      ...(reload ? ["daemon-reload"] : []),
      ...after.map((v) => v.join(" ")),
    ];
    const did =
      !record && isAbsent(svc) ? "created" : kept?.declared === next.declared ? "repaired" : "updated";
    return step(id, did, "apply", parts.join(", "), data);
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
    if (record.held)
      return step(
        id,
        "unchanged",
        "forget",
        `${record.name} left as it was found: it was held, never the mesh's`,
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
        detail: `${(e as NodeJS.ErrnoException).code ?? "error"}: ${(e as Error).message.split("\n")[0]}`,
        // a write that failed half way: the record still names every file either apply may have written
        record: s.action === "apply" ? s.data.intent : (record ?? null),
      };
    }
  },
};

/** A held process is left as it is; only an id renamed off a process of the mesh's removes that one first. */
async function holdProcess(
  s: ProcessStep,
  data: HoldData,
  old: ProcessRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<ProcessRecord>> {
  if (data.previous) {
    const gone = await removeProcess(data.previous, old, ctx);
    if (gone.did === "failed") return gone;
  }
  return { did: s.did, detail: s.detail, record: data.record };
}

async function applyProcess(
  s: ProcessStep,
  data: ApplyData,
  old: ProcessRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<ProcessRecord>> {
  const { root, exec } = ctx.ports;
  // until it has all been read back, the record names every bundle file either apply wrote, so removal misses none
  const partial = data.intent;
  const failed = (why: string): Executed<ProcessRecord> => ({
    did: "failed",
    detail: `${serviceUnit(data.name)}: ${why}`,
    record: partial,
  });
  // the bundle first, so the new units are verified against the program they will run, and only then swapped in
  const isUnit = (w: FileWrite) => w.path.startsWith(`${UNIT_DIR}/`);
  for (const w of data.writes.filter((w) => !isUnit(w))) await writeRegular(root, w.path, w.bytes, w.mode);
  if (data.writes.some(isUnit)) {
    const why = await unitsProblem(root, exec, data.units);
    if (why)
      return failed(`${why}; nothing was stopped or replaced, and the unit systemd runs stays as it was`);
  }
  if (data.previous) {
    const gone = await removeProcess(data.previous, old, ctx);
    if (gone.did === "failed") return gone;
  }
  for (const verb of data.before) {
    const why = await systemctl(exec, ...verb);
    if (why) return failed(why);
  }
  for (const w of data.writes.filter(isUnit)) await writeRegular(root, w.path, w.bytes, w.mode);
  for (const path of data.removes) await removeRegular(root, path);
  if (data.reload) {
    const why = await systemctl(exec, "daemon-reload");
    if (why) return failed(why);
  }
  for (const verb of data.after) {
    const why = await systemctl(exec, ...verb);
    if (why) return failed(why);
  }
  const wrong = await readBackProblem(data, ctx);
  if (wrong) return failed(`read back ${wrong}`);
  const unit = data.scheduled ? timerUnit(data.name) : serviceUnit(data.name);
  return { did: s.did, detail: `${s.detail}; read back ${unit} enabled, active`, record: data.record };
}

async function readBackProblem(data: ApplyData, ctx: DecideContext): Promise<string | null> {
  const { name, scheduled } = data;
  for (const w of data.writes) {
    const back = await readRegular(ctx.ports.root, w.path);
    if (typeof back !== "object" || back === null || back.sha !== w.sha || back.mode !== w.mode)
      return `${w.path} differs from what was written`;
  }
  const unit = scheduled ? timerUnit(name) : serviceUnit(name);
  const back = await showUnit(ctx.ports.exec, unit);
  if (typeof back === "string") return back;
  if (back.needReload) return `${unit}: NeedDaemonReload=yes`;
  if (!isEnabled(back.file)) return `${unit}: UnitFileState=${back.file || "(none)"}`;
  if (back.active !== "active") return `${unit}: ActiveState=${back.active} (${back.sub})`;
  return null;
}

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

/** Stop and disable what is loaded, remove both unit files and the bundle (no link followed), and say what went. */
async function removeProcess(
  data: RemoveData,
  record: ProcessRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<ProcessRecord>> {
  const { root, exec } = ctx.ports;
  const { name } = data;
  const keep = record ?? null;
  const said: string[] = [];
  if (data.loaded.length) {
    const why = await systemctl(exec, "disable", "--now", ...data.loaded);
    if (why) return { did: "failed", detail: why, record: keep };
    said.push(`stopped and disabled ${data.loaded.join(", ")}`);
  }
  const removed: string[] = [];
  for (const unit of [serviceUnit(name), timerUnit(name)])
    if (await removeRegular(root, unitPath(unit))) removed.push(unitPath(unit));
  if (removed.length) {
    const why = await systemctl(exec, "daemon-reload");
    if (why) return { did: "failed", detail: why, record: keep };
  }
  const tree = data.leave ? { files: 0, existed: false } : await removeTree(root, bundleDir(name));
  if (typeof tree === "string")
    return {
      did: "failed",
      detail: [...said, `removed ${removed.join(", ") || "no unit file"}`, tree].join("; "),
      record: keep,
    };
  if (tree.existed) removed.push(`${bundleDir(name)} (${tree.files} file${tree.files === 1 ? "" : "s"})`);
  said.push(removed.length ? `removed ${removed.join(", ")}` : "nothing of it was left to remove");
  if (data.leave) said.push(`${data.leave}: it is the operator's now`);
  for (const unit of [serviceUnit(name), timerUnit(name)]) {
    const back = await showUnit(exec, unit);
    if (typeof back === "string") return { did: "failed", detail: back, record: keep };
    if (!isAbsent(back))
      return {
        did: "failed",
        detail: `${said.join("; ")}; read back ${unit}: LoadState=${back.load}`,
        record: keep,
      };
  }
  return { did: "removed", detail: said.join("; "), record: null };
}
