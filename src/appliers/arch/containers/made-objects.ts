// Networks and volumes: named runtime objects the mesh either made or found. What their two appliers decide
// and do alike is here — made when absent, removed when undeclared only if the mesh made them, the executor's
// settling of steps that touch nothing, and the read back after a create — so the rules cannot drift apart.

import {
  type Answer,
  isError,
  type NetworkInfo,
  type Runtime,
  type RuntimeFinder,
  type VolumeInfo,
} from "../../../system/arch/index.ts";
import type { RuntimeKind } from "../../../vocabulary/index.ts";
import type { stepsOf } from "../../step.ts";
import type { DecideContext, Executed, RecordBase, Step } from "../../types.ts";
import { type Session, sessionOf } from "./session.ts";

export type MadeKind = "network" | "volume";

export interface MadeRecord extends RecordBase {
  name: string;
  runtime: RuntimeKind;
  /** True when the mesh made it: then, and only then, undeclaring removes it. */
  created: boolean;
}

type StepOf = ReturnType<typeof stepsOf>;

/** Absent from the runtime: made, or made again when the mesh had made it and it is gone. */
export function absentStep(step: StepOf, id: string, name: string, mine: boolean, next: MadeRecord): Step {
  return step(
    id,
    mine ? "repaired" : "created",
    "create",
    `${name} ${mine ? "created again: it was gone" : "created"}`,
    next,
  );
}

/** Undeclared and the mesh's: removed if the runtime still has it; `removed` says why it goes. */
export async function removalStep(
  step: StepOf,
  kind: MadeKind,
  id: string,
  record: MadeRecord,
  ctx: DecideContext,
  finder: RuntimeFinder,
  removed: string,
): Promise<Step> {
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

/**
 * Every step but a create carried out as both appliers carry it out (nothing to do, forgotten, refused,
 * removed); a create returns the runtime to make it with, the object's cached answer already forgotten.
 */
export async function settle<Rec extends MadeRecord>(
  kind: MadeKind,
  st: Step,
  record: Rec | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
): Promise<Executed<Rec> | ToCreate<Rec>> {
  const next = (st.data as Rec | undefined) ?? record ?? null;
  if (st.action === "none" || st.action === "note") return { did: st.did, detail: st.detail, record: next };
  if (st.action === "forget") return { did: st.did, detail: st.detail, record: null };
  const s = sessionOf(ctx, finder);
  const rt = s.runtime(next?.runtime);
  if (st.action === "fail" || st.action === "refuse" || typeof rt === "string" || !next)
    return { did: "failed", detail: typeof rt === "string" ? rt : st.detail, record: record ?? null };
  s.forget(rt, kind, next.name);
  if (st.action !== "remove") return { s, rt, next };
  const r = await rt.must([kind, "rm", next.name]);
  if (isError(r))
    return { did: "failed", detail: `${next.name} could not be removed: ${r.error}`, record: next };
  return { did: "removed", detail: st.detail, record: null };
}

/** The step is over: what `settle` or `readBack` returned is the executor's answer. */
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
