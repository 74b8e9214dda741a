// The decider: one decision for plan and apply, so the preview cannot lie. Each resource's step, decided in
// declaration order (what reads changes again as the apply reaches it), removals after, by the host's applier
// of its type, or held as found by the apply itself (adopted.ts); each step carries the resource it makes
// match and the record its decision saw, named, for its executor.
import type { DecideContext } from "../appliers/index.ts";
import { FILE_READ_CONCURRENCY } from "../defaults.ts";
import type { Host } from "../hosts/index.ts";
import type { Records } from "../store/index.ts";
import { type Declaration, type Did, madeOf, pathsOf, type Resource } from "../vocabulary/index.ts";
import { giveBackOf, holdOf, isAdoptedStep, isHeldRecord } from "./adopted.ts";
import { mapLimited } from "./map-limited.ts";
import { Forecast, type LiveRecords } from "./records.ts";
import { CHANGING, type PlanInput, type PlannedStep } from "./steps.ts";
import { claimsOf, readsChanges, recordPath, traitsOf, wroteIn } from "./traits.ts";

export function declaredPaths(declaration: Declaration): Set<string> {
  return new Set(declaration.resources.flatMap(pathsOf));
}

/** The record of `id` if it still describes the same thing; a type or path change is a removal plus a new resource. */
function sameThing(host: Host, record: Records[string] | undefined, r: Resource): boolean {
  if (!record || record.type !== r.type) return false;
  const path = recordPath(host, record);
  const paths = pathsOf(r);
  return path === undefined || paths.length === 0 || paths.includes(path);
}

export interface Decider {
  /** Decide the step for `r` now, with what has changed so far. */
  decide(r: Resource, changed: ReadonlySet<string>, made?: ReadonlySet<string>): Promise<PlannedStep[]>;
  /** Decide the removals of everything recorded and no longer declared, last declared first. */
  removals(changed: ReadonlySet<string>): Promise<PlannedStep[]>;
  /** Decide a run of resources that read no changes, concurrently. */
  decideBatch(rs: Resource[]): Promise<PlannedStep[][]>;
  /** The context a step is decided and executed in, with the records as they stand now. */
  context(changed: ReadonlySet<string>, made?: ReadonlySet<string>): DecideContext;
}

/** No ids changed, no paths made: what a run of resources reading no changes is decided against. */
const NOTHING: ReadonlySet<string> = new Set();

/** The context of a decision, with the records as `live` stands when it is asked. */
function contextMaker(input: PlanInput, live: LiveRecords): Decider["context"] {
  const { declaration, records, host } = input;
  const paths = declaredPaths(declaration);
  const claims = claimsOf(host, records);
  // one context per (changed, made) pair: it reads both sets, the records and the claims live, and building
  // one per resource was a tenth of a 1,000-file no-op (issue 22)
  let last: DecideContext | undefined;
  return (changed, made = NOTHING) => {
    if (last?.changed === changed && last.made === made) return last;
    last = {
      ...input.ctx,
      changed,
      made,
      declaredPaths: paths,
      wrote: (path) => wroteIn(host, live.now, path),
      claimed: (path, id) => {
        const claim = claims.get(path);
        return claim && claim.id !== id ? claim.record : undefined;
      },
      mode: declaration.mode,
      declared: declaration.resources,
    };
    return last;
  };
}

/**
 * `ids` (last declared first) with whatever lies under a path going before it: a directory declared after a
 * file in it was removed first, found not empty, and left there with the file's parents for good.
 */
function innermostFirst(host: Host, records: Records, ids: string[]): string[] {
  const pathOf = (id: string) => recordPath(host, records[id]!);
  const out: string[] = [];
  const place = (id: string) => {
    if (out.includes(id)) return;
    const p = pathOf(id);
    if (p !== undefined)
      for (const other of ids) if (other !== id && pathOf(other)?.startsWith(`${p}/`)) place(other);
    out.push(id);
  };
  for (const id of ids) place(id);
  return out;
}

/** The removals of everything recorded and no longer declared, last declared first, what is under a path before it. */
async function removalsOf(input: PlanInput, ctx: DecideContext): Promise<PlannedStep[]> {
  const { declaration, records, order, host } = input;
  const declaredIds = new Set(declaration.resources.map((r) => r.id));
  const last = [...order].reverse().filter((id) => !declaredIds.has(id) && records[id]);
  const gone = innermostFirst(host, records, last);
  const steps: PlannedStep[] = [];
  for (const id of gone) {
    const record = records[id]!;
    const givenBack = giveBackOf(host, id, record);
    if (givenBack) {
      steps.push({ ...givenBack, record });
      continue;
    }
    const applier = host.appliers.get(record.type);
    if (!applier) {
      const detail = `no applier on this host gives back a ${record.type}`;
      steps.push({ id, type: record.type, did: "failed", action: "refuse", detail, record });
      continue;
    }
    steps.push({ ...(await applier.decideRemoval(id, record, ctx)), record });
  }
  return steps;
}

/**
 * The decision function both the plan and the apply call, so the preview cannot lie. `live`: the records as
 * the apply updates them (a plan's own Forecast, fed by planSteps).
 */
export function decider(input: PlanInput, live: LiveRecords): Decider {
  const { records, host } = input;
  const context = contextMaker(input, live);
  const decide = async (
    r: Resource,
    changed: ReadonlySet<string>,
    made?: ReadonlySet<string>,
  ): Promise<PlannedStep[]> => {
    const applier = host.appliers.get(r.type)!;
    const record = records[r.id];
    const ctx = context(changed, made);
    const steps: PlannedStep[] = [];
    const current = sameThing(host, record, r) ? record : undefined;
    if (record && !current) {
      const old = host.appliers.get(record.type);
      if (old) steps.push({ ...(await old.decideRemoval(r.id, record, ctx)), record });
    }
    const held = await holdOf(host, r, current, ctx);
    // a hold's record is the apply's: the applier is handed only its own, so a resource taken now is new to it
    const own = current && !isHeldRecord(current) ? current : undefined;
    const step = held ?? (await applier.decide(r, own, ctx));
    steps.push({ ...step, wanted: r, record: held ? current : own });
    return steps;
  };
  return {
    decide,
    context,
    decideBatch: (rs) => mapLimited(rs, FILE_READ_CONCURRENCY, (r) => decide(r, NOTHING)),
    removals: (changed) => removalsOf(input, context(changed)),
  };
}

/** Consecutive resources grouped so that those reading no changes are decided (and written) together. */
function runsOf(host: Host, resources: Resource[]): Resource[][] {
  const runs: Resource[][] = [];
  for (const r of resources) {
    const last = runs.at(-1);
    if (last && !readsChanges(host, r) && !readsChanges(host, last[0]!)) last.push(r);
    else runs.push([r]);
  }
  return runs;
}

/** What a step's outcome tells the steps after it: its id changed, and what it makes (its kind's `madeOf`) exists. */
export function noteChange(step: PlannedStep, did: Did, changed: Set<string>, made: Set<string>): void {
  if (!CHANGING.has(did)) return;
  changed.add(step.id);
  if (step.wanted && did !== "removed") for (const path of madeOf(step.wanted)) made.add(path);
}

/** A plan's own step, fed forward into its forecast of the records: what a later `wrote` reads. */
function foresee(host: Host, forecast: Forecast, step: PlannedStep): void {
  // the record the step journals is the one the apply will leave: a later `wrote` reads the plan's own write
  const intent = isAdoptedStep(step) ? undefined : traitsOf(host, step.type).journal?.(step).intent;
  if (step.wanted && intent && step.action !== "refuse") forecast.foresee(step.id, intent);
}

/** The whole plan: every step the apply would take, in its order, with what each would change fed forward. */
export async function planSteps(input: PlanInput): Promise<PlannedStep[]> {
  const forecast = new Forecast(input.records);
  const d = decider(input, forecast);
  const changed = new Set<string>(input.owed ?? []);
  const made = new Set<string>();
  const steps: PlannedStep[] = [];
  for (const run of runsOf(input.host, input.declaration.resources)) {
    const decided = readsChanges(input.host, run[0]!)
      ? [await d.decide(run[0]!, changed, made)]
      : await d.decideBatch(run);
    for (const group of decided)
      for (const step of group) {
        noteChange(step, step.did, changed, made);
        foresee(input.host, forecast, step);
        steps.push(step);
      }
  }
  steps.push(...(await d.removals(changed)));
  return steps;
}
