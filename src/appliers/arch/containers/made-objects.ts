// Networks and volumes: named runtime objects the mesh either made or found. What their two appliers decide
// and do alike is here — their steps, made when absent, removed when undeclared only if the mesh made them, the
// executors of a step kept or a removal, and the read back after a create — so the rules cannot drift apart.

import * as z from "zod";
import {
  type Answer,
  type InfoOf,
  isError,
  type NetworkInfo,
  type Runtime,
  type RuntimeFinder,
  type VolumeInfo,
} from "../../../system/arch/index.ts";
import { type Did, RuntimeKind } from "../../../vocabulary/index.ts";
import { failsAgain } from "../../step.ts";
import type { DecideContext, Executed, Step, StepOf } from "../../types.ts";
import { type Session, sessionOf } from "./session.ts";

export type MadeKind = "network" | "volume";

/** What a network's and a volume's records both say, beside their own fields. */
export const madeFields = {
  name: z.string(),
  runtime: RuntimeKind,
  /** True when the mesh made it: then, and only then, undeclaring removes it. */
  created: z.boolean(),
};
const MadeRecord = z.looseObject({ type: z.string(), pending: z.boolean().optional(), ...madeFields });
export type MadeRecord = z.infer<typeof MadeRecord>;

/** The steps a network and a volume share, keyed by action: the record it will have rides on each that keeps it. */
export type MadeStep<Rec extends MadeRecord, W> =
  | StepOf<"create", Making<Rec, W>>
  | StepOf<"none" | "note", Rec>
  | StepOf<"remove" | "forget" | "fail" | "refuse">;

/**
 * What a create (or a recreate) carries to its executor: the record it will keep, and the resource it makes,
 * named (balena-supervisor's `target`), so the executor is handed it, never `!`.
 */
export interface Making<Rec, W> {
  next: Rec;
  wanted: W;
}

/** Absent from the runtime: made, or made again when the mesh had made it and it is gone. */
export function absentStep<Rec extends MadeRecord, W extends { id: string; name: string }, S extends Step>(
  step: (id: string, did: Did, action: "create", detail: string, data: Making<Rec, W>) => S,
  w: W,
  mine: boolean,
  next: Rec,
): S {
  return step(
    w.id,
    mine ? "repaired" : "created",
    "create",
    `${w.name} ${mine ? "created again: it was gone" : "created"}`,
    { next, wanted: w },
  );
}

/** What the runtime a declared object names holds under its name, and the record it will have. */
export interface Looked<K extends MadeKind> {
  rt: Runtime;
  found: InfoOf<K> | null;
  mine: boolean;
  next: MadeRecord & { type: K };
}

/**
 * The one look a network's and a volume's decide start with (which runtime, what it holds, whose it is), or
 * the step that says why it could not look: no such runtime (refused) or the runtime failing (failed).
 */
export async function lookUp<K extends MadeKind, S extends Step>(
  step: (
    id: string,
    did: Did,
    action: "refuse" | "fail",
    detail: string,
    data?: undefined,
    field?: string,
  ) => S,
  kind: K,
  w: { id: string; name: string; runtime?: RuntimeKind | undefined },
  record: MadeRecord | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
): Promise<Looked<K> | S> {
  const s = sessionOf(ctx, finder);
  const rt = s.runtime(w.runtime ?? record?.runtime);
  if (typeof rt === "string") return step(w.id, "failed", "refuse", rt, undefined, "runtime");
  const found = await s.ask(rt, kind, w.name);
  if (isError(found)) return step(w.id, "failed", "fail", found.error);
  const mine = record?.created === true;
  return { rt, found, mine, next: { type: kind, name: w.name, runtime: rt.kind, created: mine || !found } };
}

/** Undeclared and the mesh's: removed if the runtime still has it; `removed` says why it goes. */
export async function removalStep<S extends Step>(
  step: (id: string, did: Did, action: "fail" | "forget" | "remove", detail: string) => S,
  kind: MadeKind,
  id: string,
  record: MadeRecord,
  ctx: DecideContext,
  finder: RuntimeFinder,
  removed: string,
): Promise<S> {
  const s = sessionOf(ctx, finder);
  const rt = s.runtime(record.runtime);
  if (typeof rt === "string") return step(id, "failed", "fail", rt);
  const found = await s.ask(rt, kind, record.name);
  if (isError(found)) return step(id, "failed", "fail", found.error);
  if (!found) return step(id, "unchanged", "forget", `${record.name} was already gone: nothing was removed`);
  return step(id, "removed", "remove", removed);
}

/** Where the executor goes on to create: the session, the runtime and the record to keep. */
export interface ToCreate<Rec extends MadeRecord> {
  s: Session;
  rt: Runtime;
  next: Rec;
}

/** The executor of a step that keeps the object as it is (`none`, `note`): the record it carries is kept. */
const kept = async <Rec>(st: { did: Did; detail: string; data: Rec }): Promise<Executed<Rec>> => ({
  did: st.did,
  detail: st.detail,
  record: st.data,
});

/** The executor of a removal, for either kind: `<kind> rm` of what the record names, the cached answer forgotten. */
function removeMade(kind: MadeKind, finder: RuntimeFinder) {
  return async <Rec extends MadeRecord>(
    st: { detail: string },
    _w: unknown,
    record: Rec | undefined,
    ctx: DecideContext,
  ): Promise<Executed<Rec>> => {
    const s = sessionOf(ctx, finder);
    const rt = s.runtime(record?.runtime);
    if (typeof rt === "string" || !record)
      return { did: "failed", detail: typeof rt === "string" ? rt : st.detail, record: record ?? null };
    s.forget(rt, kind, record.name);
    const r = await rt.must([kind, "rm", record.name]);
    if (isError(r))
      return { did: "failed", detail: `${record.name} could not be removed: ${r.error}`, record };
    return { did: "removed", detail: st.detail, record: null };
  };
}

/**
 * The executors both appliers share, one per action but the create (and a network's recreate): kept, forgotten,
 * refused and removed alike. Each is generic in the record, so it fits either applier's table.
 */
export function madeExecutors(kind: MadeKind, finder: RuntimeFinder) {
  return {
    none: kept,
    note: kept,
    forget: async <Rec>(st: { did: Did; detail: string }): Promise<Executed<Rec>> => ({
      did: st.did,
      detail: st.detail,
      record: null,
    }),
    fail: failsAgain,
    refuse: failsAgain,
    remove: removeMade(kind, finder),
  };
}

/** A create's runtime, the object's cached answer already forgotten; or the failure when there is none. */
export function toCreate<Rec extends MadeRecord>(
  kind: MadeKind,
  next: Rec,
  record: Rec | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
): ToCreate<Rec> | Executed<Rec> {
  const s = sessionOf(ctx, finder);
  const rt = s.runtime(next.runtime);
  if (typeof rt === "string") return { did: "failed", detail: rt, record: record ?? null };
  s.forget(rt, kind, next.name);
  return { s, rt, next };
}
/** The step is over: what `toCreate` or `readBack` returned is the executor's answer. */
export const isDone = <Rec extends MadeRecord, T extends object>(r: Executed<Rec> | T): r is Executed<Rec> =>
  "did" in r;

/** Just made: what the runtime now says of it, or the failure to report (absent, or not as declared). */
export async function readBack<Info extends NetworkInfo | VolumeInfo, Rec extends MadeRecord>(
  made: ToCreate<Rec>,
  kind: MadeKind,
  name: string,
  differences: (back: Info) => string[],
): Promise<Info | Executed<Rec>> {
  // asked afresh: a step run beside the create may have asked for the name while it was still absent
  made.s.forget(made.rt, kind, name);
  const back = (await made.s.ask(made.rt, kind, name)) as Answer<Info>;
  if (isError(back) || !back)
    return {
      did: "failed",
      detail: `${name} read back: ${isError(back) ? back.error : "not there"}`,
      record: made.next,
    };
  const diff = differences(back);
  if (diff.length)
    return { did: "failed", detail: `${name} read back differently: ${diff.join(", ")}`, record: made.next };
  return back;
}
