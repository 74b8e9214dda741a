// An applier as the host dispatches to it by type. Each typed applier is registered once (`registered`), where
// its own resource, record and step types are known, so the compiler checks every call into it; what crosses
// into the host's one map is a resource, a record or a step checked at run time to be its own: a resource by
// its type, a record by its record schema, a step by the token its own decision left on it. No cast, and no
// method parameter compared both ways (a typed applier never stands as another's by bivariance).
import type { Resource } from "../vocabulary/index.ts";
import { leftAsFound } from "./step.ts";
import type { Applier, Executed, RecordBase, Registered, ResourceOf, Step, Traits } from "./types.ts";

/** The key its decisions carry: which decided step of its applier a step is (spread copies keep it). */
const DECIDED: unique symbol = Symbol("decided");

/** A step as a registered applier decided it: the token by which it finds its own typed step again. */
type Decided = Step & { [DECIDED]?: object };

/** What a step that is not its applier's own comes to: it fails, touching nothing. */
const notOwn = (step: Step, record: RecordBase | undefined): Executed<RecordBase> => ({
  did: "failed",
  detail: `${step.detail} (not a step of the ${step.type} applier)`,
  record: record ?? null,
});

/**
 * `a` registered under its own type: the one place its types meet the host's. A resource, record or step of
 * another type is refused (a record: unread; a step: failed) instead of reaching it typed as its own.
 */
export function registered<T extends Resource["type"], Rec extends RecordBase, S extends Step>(
  a: Applier<ResourceOf<T>, Rec, S>,
): Registered<T> {
  const isOwn = (w: Resource): w is ResourceOf<T> => w.type === a.type;
  const records = recordsOf(a);
  const steps = new WeakMap<object, S>();
  const decided = (s: S): Step => {
    const token = {};
    steps.set(token, s);
    return { ...s, [DECIDED]: token } satisfies Decided;
  };
  const own = (step: Decided): S | undefined => {
    const token = step[DECIDED];
    return token ? steps.get(token) : undefined;
  };
  const wantedOf = (w: Resource | undefined) => (w && isOwn(w) ? w : undefined);
  const mine = (w: Resource) => {
    if (!isOwn(w)) throw new Error(`the ${a.type} applier was handed a ${w.type}`);
    return w;
  };
  return {
    type: a.type,
    check: (record) => records.read(record),
    decide: async (w, record, ctx) => decided(await a.decide(mine(w), records.read(record), ctx)),
    decideRemoval: async (id, record, ctx) => {
      const rec = records.read(record);
      if (!rec)
        return { id, type: record.type, did: "failed", action: "fail", detail: `not a ${a.type} record` };
      return decided(await a.decideRemoval(id, rec, ctx));
    },
    execute: async (step, w, record, ctx) => {
      const s = own(step);
      if (!s) return notOwn(step, record);
      return records.kept(await a.execute(s, wantedOf(w), records.read(record), ctx));
    },
    traits: traitsOf(a.traits ?? {}, wantedOf, records.read, own),
  };
}

/** The part of an applier that says what its records are. */
interface Reads<Rec> {
  type: string;
  recordSchema: { safeParse(v: unknown): { success: true; data: Rec } | { success: false } };
}

/**
 * How a registered applier reads records: each parsed once by its schema, the parse being the record handed
 * on (and kept by the apply); what its executors hand back is known as its own without a parse.
 */
function recordsOf<Rec extends RecordBase>(a: Reads<Rec>) {
  const known = new WeakMap<object, Rec>();
  const read = (record: RecordBase | undefined): Rec | undefined => {
    if (!record || record.type !== a.type) return undefined;
    const seen = known.get(record);
    if (seen) return seen;
    const parsed = a.recordSchema.safeParse(record);
    if (!parsed.success) return undefined;
    known.set(parsed.data, parsed.data);
    return parsed.data;
  };
  const kept = (done: Executed<Rec>): Executed<RecordBase> => {
    if (done.record) known.set(done.record, done.record);
    return done;
  };
  return { read, kept };
}

/** The traits of `a` over the host's types: each handed only its own resource, record or step, else not asked. */
function traitsOf<R extends Resource, Rec extends RecordBase, S extends Step>(
  t: Traits<R, Rec, S>,
  wantedOf: (w: Resource | undefined) => R | undefined,
  read: (record: RecordBase | undefined) => Rec | undefined,
  own: (step: Step) => S | undefined,
): Traits<Resource, RecordBase, Step> {
  const withWanted =
    <U>(f: ((w: R) => U) | undefined, none: U) =>
    (w: Resource): U => {
      const mine = wantedOf(w);
      return f && mine ? f(mine) : none;
    };
  const withRecord =
    <U>(f: ((r: Rec) => U) | undefined, none: U) =>
    (r: RecordBase): U => {
      const mine = read(r);
      return f && mine ? f(mine) : none;
    };
  return {
    readsChanges: withWanted(t.readsChanges, false),
    stopsOnFailure: t.stopsOnFailure,
    writesFiles: t.writesFiles,
    secretAt: withWanted(t.secretAt, undefined),
    journal: (step) => {
      const s = own(step);
      return s && t.journal ? t.journal(s) : {};
    },
    pathOf: withRecord(t.pathOf, undefined),
    originalsAt: t.originalsAt && withRecord(t.originalsAt, []),
    wrote: withRecord(t.wrote, undefined),
    found:
      t.found &&
      (async (w, ctx, held) => {
        const mine = wantedOf(w);
        return mine && t.found ? t.found(mine, ctx, read(held)) : false;
      }),
    heldAs: t.heldAs && withRecord(t.heldAs, undefined),
    leftAs: t.leftAs && ((r) => withRecord(t.leftAs, leftAsFound(r.type))(r)),
    sameAs: (r, w) => {
      const [record, wanted] = [read(r), wantedOf(w)];
      // another kind's record never names what `wanted` does
      return record && wanted ? (t.sameAs?.(record, wanted) ?? true) : false;
    },
    diff: async (step, w, root) => {
      const s = own(step);
      return s && t.diff ? t.diff(s, wantedOf(w), root) : undefined;
    },
  };
}
