// Carrying out a process's steps (process.ts decides them): the bundle written and the units verified before
// any is swapped in, systemd told in the decided order, and everything read back; a removal stops, disables and
// removes what derives from the name, and reads back that systemd has none of it loaded.
import {
  isAbsent,
  isEnabled,
  readRegular,
  removeRegular,
  removeTree,
  showUnit,
  systemctl,
  UNIT_DIR,
  unitPath,
  unitsProblem,
  writeRegular,
} from "../../system/arch/index.ts";
import type { DecideContext, Executed, StepOf } from "../types.ts";
import { bundleDir, type ProcessRecord, serviceUnit, timerUnit } from "./process-units.ts";

export interface FileWrite {
  path: string;
  bytes: Uint8Array;
  sha: string;
  mode: number;
}

export interface RemoveData {
  name: string;
  /** Units systemd has loaded, to stop and disable. */
  loaded: string[];
  /** Why the bundle directory is left as it is (a link is never followed): given back to the operator. */
  leave?: string;
}

export interface ApplyData {
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

/** The process applier's steps, keyed by action: each executor below is handed its own. */
export type ProcessStep =
  | StepOf<"apply", ApplyData>
  | StepOf<"remove", RemoveData>
  | StepOf<"fail" | "refuse">;

/** The process this id named before (renamed off one of the mesh's), removed first: the failure of that, or null. */
export async function previousGone(
  previous: RemoveData | undefined,
  old: ProcessRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<ProcessRecord> | null> {
  if (!previous) return null;
  const gone = await removeProcess(previous, old, ctx);
  return gone.did === "failed" ? gone : null;
}

export async function applyProcess(
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
  const gone = await previousGone(data.previous, old, ctx);
  if (gone) return gone;
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

/** Stop and disable what is loaded, remove both unit files and the bundle (no link followed), and say what went. */
export async function removeProcess(
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
