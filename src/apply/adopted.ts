// The adopted mode's one hold and give-back, for every kind whose facts say it has one (`adopted`) and whose
// applier says how one is found (`found`): on an adopted node what the host already has is the host's, held
// as found until a declaration takes it, and given back as found when undeclared. The applier never sees a
// held resource: it decides only what the mesh makes (and, taken, what was found when it was held).
import * as z from "zod";
import {
  type DecideContext,
  type Executed,
  type Found,
  leftAsFound,
  type RecordBase,
  type Step,
} from "../appliers/index.ts";
import type { Host } from "../hosts/index.ts";
import type { Records } from "../store/index.ts";
import { factsOf, pathsOf, type Resource } from "../vocabulary/index.ts";
import { traitsOf } from "./traits.ts";

/** The apply's own record of a hold, for a kind whose applier keeps none: nothing of it is the mesh's. */
const HeldRecord = z.strictObject({
  type: z.string(),
  held_as_found: z.literal(true),
  pending: z.boolean().optional(),
});
type HeldRecord = z.infer<typeof HeldRecord>;

/** What a hold carries out: what the id named before given back first (its applier's step), then the record kept. */
interface HoldData {
  record: RecordBase;
  first?: { step: Step; record: RecordBase };
}

/** The two steps the apply itself carries out: no applier is asked to decide them. */
export type AdoptedStep = Step & {
  action: "hold-as-found" | "give-back-as-found";
  by: "apply";
  data?: HoldData;
};

/** Whether `record` is the apply's own record of a hold (parsed, not trusted: records come from disk). */
export const isHeldRecord = (record: RecordBase | undefined): boolean => HeldRecord.safeParse(record).success;

export const isAdoptedStep = (step: Step): step is AdoptedStep => "by" in step && step.by === "apply";

/** What a record of a hold holds (its applier's words, or the id), or undefined: a record of what the mesh made. */
function heldAs(host: Host, id: string, record: RecordBase): string | undefined {
  if (isHeldRecord(record)) return id;
  return traitsOf(host, record.type).heldAs?.(record);
}

/** What an adopted node holds until a declaration takes it, by id: each record of a hold, and what it holds. */
export function holdsIn(host: Host, records: Records): { id: string; type: string; name: string }[] {
  return Object.entries(records).flatMap(([id, r]) => {
    const name = heldAs(host, id, r);
    return name === undefined ? [] : [{ id, type: r.type, name }];
  });
}

/** The hold of a kind whose applier says only that one is found: the apply's own record, its path or id. */
/** The apply's own record of a hold of `r`. */
const heldRecordOf = (r: Resource): HeldRecord => ({ type: r.type, held_as_found: true });

const plainHold = (r: Resource): Found<RecordBase> => ({
  record: heldRecordOf(r),
  detail: `${pathsOf(r)[0] ?? r.id} held: found on this adopted node (takes: true makes it the mesh's)`,
});

/**
 * The hold for `r`, or undefined when its applier decides: on an adopted node, not taken, with no record of
 * the mesh's own for this very thing, and found by its applier (held once held, where the applier says so).
 * What the id named before is given back first, as the applier's own decision would.
 */
export async function holdOf(
  host: Host,
  r: Resource,
  record: RecordBase | undefined,
  ctx: DecideContext,
): Promise<AdoptedStep | undefined> {
  const takes = factsOf(r.type).adopted?.takes;
  const applier = host.appliers.get(r.type);
  const traits = traitsOf(host, r.type);
  if (ctx.mode !== "adopted" || !takes || !applier || !traits.found || takes(r)) return undefined;
  if (record && isHeldRecord(record)) return holdStep(r, plainHold(r));
  const held = record !== undefined && heldAs(host, r.id, record) !== undefined;
  const same = record === undefined || (traits.sameAs?.(record, r) ?? true);
  if (record && !held && same) return undefined;
  const found = await traits.found(r, ctx, held && same ? record : undefined);
  if (!found) return undefined;
  const hold = found === true ? plainHold(r) : found;
  if (!record || same) return holdStep(r, hold);
  const first = held ? giveBackOf(host, r.id, record) : await applier.decideRemoval(r.id, record, ctx);
  // what it named before cannot be given back: its applier decides, and says why
  if (!first || first.did === "failed") return undefined;
  return holdStep(r, hold, { step: first, record });
}

function holdStep(r: Resource, hold: Found<RecordBase>, first?: HoldData["first"]): AdoptedStep {
  const record = hold.record ?? heldRecordOf(r);
  const did = first && first.step.did !== "unchanged" ? "updated" : "unchanged";
  const detail = first ? `${first.step.detail}; then ${hold.detail}` : hold.detail;
  return {
    id: r.id,
    type: r.type,
    did,
    action: "hold-as-found",
    detail,
    by: "apply",
    data: { record, first },
  };
}

/** The give-back of a held record no longer declared: nothing of it was the mesh's, so nothing is touched. */
export function giveBackOf(host: Host, id: string, record: RecordBase): AdoptedStep | undefined {
  const what = heldAs(host, id, record);
  if (what === undefined) return undefined;
  const detail = traitsOf(host, record.type).leftAs?.(record) ?? leftAsFound(what);
  return { id, type: record.type, did: "unchanged", action: "give-back-as-found", detail, by: "apply" };
}

/** What a hold or give-back came to: what the id named before given back, then the held record kept, or forgotten. */
export async function executeAdopted(
  host: Host,
  step: AdoptedStep,
  ctx: DecideContext,
): Promise<Executed<RecordBase>> {
  const first = step.data?.first;
  if (first && !isAdoptedStep(first.step)) {
    const applier = host.appliers.get(first.step.type);
    const back = applier
      ? await applier.execute(first.step, undefined, first.record, ctx)
      : {
          did: "failed" as const,
          detail: `no applier on this host gives back a ${first.step.type}`,
          record: null,
        };
    if (back.did === "failed")
      return { did: "failed", detail: back.detail, record: back.record ?? first.record };
  }
  const record = step.action === "hold-as-found" ? (step.data?.record ?? null) : null;
  return { did: step.did, detail: step.detail, record };
}
