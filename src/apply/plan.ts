// One decision for plan and apply: each resource's step, decided in declaration order, removals after.

import type { DecideContext, RecordBase, Step, Traits } from "../appliers/index.ts";
import { FILE_READ_CONCURRENCY } from "../defaults.ts";
import type { Host } from "../hosts/index.ts";
import type { Records } from "../store/index.ts";
import { type Declaration, type Did, madeOf, pathsOf, type Resource } from "../vocabulary/index.ts";
import { giveBackOf, holdOf, isAdoptedStep, isHeldRecord } from "./adopted.ts";

/** What a step does to the machine: these make `on` and `restart_on` fire. */
export const CHANGING: ReadonlySet<Did> = new Set([
  "created",
  "updated",
  "repaired",
  "removed",
  "restored",
  "ran",
]);

export interface PlannedStep extends Step {
  /** The resource this step makes match; absent for a removal. */
  resource?: Resource;
  /** The record of earlier applies for this id, if any. */
  record?: RecordBase;
}

export interface PlanInput {
  declaration: Declaration;
  records: Records;
  order: string[];
  host: Host;
  ctx: Omit<DecideContext, "changed" | "declaredPaths" | "made">;
  /** Ids an earlier apply changed before it was killed or failed: what reads changes still owes them. */
  owed?: ReadonlySet<string>;
}

export function declaredPaths(declaration: Declaration): Set<string> {
  return new Set(declaration.resources.flatMap(pathsOf));
}

/** `fn` over `items`, at most `limit` at once, results in order. */
export async function mapLimited<T, U>(items: T[], limit: number, fn: (item: T) => Promise<U>): Promise<U[]> {
  const out = new Array<U>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** What the applier of `type` says of its resources, steps and records: nothing where the host has none. */
export function traitsOf(host: Host, type: string): Traits<Resource, RecordBase, Step> {
  return host.appliers.get(type)?.traits ?? {};
}

/**
 * What looks at what changed (or was written) before it is reached is decided in order, and again when the
 * apply reaches it; everything else side by side. The applier says which of its resources do.
 */
export const readsChanges = (host: Host, r: Resource): boolean =>
  traitsOf(host, r.type).readsChanges?.(r) ?? false;

/** The path a record names, as its applier reads it; undefined for a record that names none. */
export const recordPath = (host: Host, record: RecordBase): string | undefined =>
  traitsOf(host, record.type).pathOf?.(record);

/** The record of `id` if it still describes the same thing; a type or path change is a removal plus a new resource. */
function sameThing(host: Host, record: RecordBase | undefined, r: Resource): boolean {
  if (!record || record.type !== r.type) return false;
  const path = recordPath(host, record);
  const paths = pathsOf(r);
  return path === undefined || paths.length === 0 || paths.includes(path);
}

/** The digest the records say the host last wrote at `path`, as they stand. */
export function wroteIn(host: Host, records: Records, path: string): string | undefined {
  for (const r of Object.values(records)) {
    const wrote = traitsOf(host, r.type).wrote?.(r);
    if (wrote && recordPath(host, r) === path) return wrote;
  }
  return undefined;
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
  /** A plan's own step, fed forward into the records as the apply will leave them: what a later `wrote` reads. */
  noteWrite(step: PlannedStep): void;
}

/** Who claims each recorded path: a path moving from one id to another is still the mesh's, never "found". */
function claimsOf(host: Host, records: Records): Map<string, { id: string; record: Records[string] }> {
  const claims = new Map<string, { id: string; record: Records[string] }>();
  for (const [id, record] of Object.entries(records)) {
    const path = recordPath(host, record);
    if (path !== undefined) claims.set(path, { id, record });
  }
  return claims;
}

/** No ids changed, no paths made: what a run of resources reading no changes is decided against. */
const NOTHING: ReadonlySet<string> = new Set();

/** The context of a decision, with the records as `live` stands when it is asked. */
function contextMaker(input: PlanInput, live: Records): Decider["context"] {
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
      wrote: (path) => wroteIn(host, live, path),
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
 * the apply updates them (a plan keeps its own copy, fed by `noteWrite`).
 */
export function decider(input: PlanInput, live: Records = { ...input.records }): Decider {
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
    steps.push({ ...step, resource: r, record: held ? current : own });
    return steps;
  };
  return {
    decide,
    context,
    noteWrite(step) {
      // the record the step journals is the one the apply will leave: a later `wrote` reads the plan's own write
      const intent = isAdoptedStep(step) ? undefined : traitsOf(host, step.type).journal?.(step).intent;
      if (step.resource && intent && step.action !== "refuse") live[step.id] = intent;
    },
    decideBatch: (rs) => mapLimited(rs, FILE_READ_CONCURRENCY, (r) => decide(r, NOTHING)),
    removals: (changed) => removalsOf(input, context(changed)),
  };
}

/** Consecutive resources grouped so that those reading no changes are decided (and written) together. */
export function runsOf(host: Host, resources: Resource[]): Resource[][] {
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
  if (step.resource && did !== "removed") for (const path of madeOf(step.resource)) made.add(path);
}

/** The whole plan: every step the apply would take, in its order, with what each would change fed forward. */
export async function planSteps(input: PlanInput): Promise<PlannedStep[]> {
  const d = decider(input);
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
        d.noteWrite(step);
        steps.push(step);
      }
  }
  steps.push(...(await d.removals(changed)));
  return steps;
}
