// The steps of an apply: what one carries (the resource it makes match, the record its decision saw, named),
// what the decision is given, and what they came to, said: as a plan's line, in the log, as an interruption, as
// one line for a step that threw.
import type { DecideContext, Logger, RecordBase, Step } from "../appliers/index.ts";
import { errnoWords } from "../faults.ts";
import type { Host } from "../hosts/index.ts";
import type { Records } from "../store/index.ts";
import { type Declaration, type Did, pathsOf, type ReportStep, type Resource } from "../vocabulary/index.ts";

/** What a step does to the machine: these make `on` and `restart_on` fire. */
export const CHANGING: ReadonlySet<Did> = new Set([
  "created",
  "updated",
  "repaired",
  "removed",
  "restored",
  "ran",
]);

/** A step as the plan decided it, carrying what its executor is handed (balena-supervisor's named step arguments). */
export interface PlannedStep extends Step {
  /** The resource this step makes match; absent for a removal. */
  wanted?: Resource;
  /** The record of earlier applies for this id, if any, as its applier's record schema checked it. */
  record?: RecordBase;
}

/** What a plan is decided from: the declaration, the checked records and their order, the host, the context. */
export interface PlanInput {
  declaration: Declaration;
  records: Records;
  order: string[];
  host: Host;
  ctx: Omit<DecideContext, "changed" | "declaredPaths" | "made">;
  /** Ids an earlier apply changed before it was killed or failed: what reads changes still owes them. */
  owed?: ReadonlySet<string>;
}

export interface PlanLine {
  id: string;
  type: string;
  did: ReportStep["did"];
  detail: string;
  /** `--diff`: a file's content as a unified diff, its mode and owner change; never a secret's content. */
  diff?: string[];
}

export function planLine(s: { id: string; type: string; did: ReportStep["did"]; detail: string }): PlanLine {
  return { id: s.id, type: s.type, did: s.did, detail: s.detail };
}

export const INTERRUPTED = "not reached: the apply was interrupted";

/** How far an interrupted apply got, or undefined when nothing was cut short. */
export function interruption(steps: ReportStep[]): { after: number; of: number } | undefined {
  if (!steps.some((s) => s.did === "not-reached" && s.detail === INTERRUPTED)) return undefined;
  return { after: steps.filter((s) => s.did !== "not-reached").length, of: steps.length };
}

/** Each step at debug; a failed one at warn, naming the resource and the reason, so the journal finds it. */
export function logSteps(log: Logger, steps: ReportStep[]): void {
  for (const s of steps) {
    if (s.did === "failed") log.warn({ id: s.id, type: s.type, reason: s.detail }, "step failed");
    else log.debug({ id: s.id, type: s.type, did: s.did, detail: s.detail }, "step done");
  }
}

/**
 * One line for an executor that threw: the declared path, never the temp file beside it, and the code once;
 * a raw errno from Node ("ENOSPC: no space left on device, write") in our words with the path declared.
 */
export function failureDetail(e: unknown, step: PlannedStep): string {
  const err = e as NodeJS.ErrnoException;
  const path = step.wanted && pathsOf(step.wanted)[0];
  if (err.code && /^E[A-Z]+$/.test(err.code) && err.message?.startsWith(`${err.code}:`))
    return `${path ? `${path}: ` : ""}${errnoWords(err.code)}`;
  let message = (err.message ?? String(e))
    .split("\n")[0]!
    .replace(/'[^']*\.mesh-tmp-[^']*'/g, path ? `'${path}'` : "a temporary file");
  if (err.code && !message.startsWith(err.code)) message = `${err.code}: ${message}`;
  return message;
}
