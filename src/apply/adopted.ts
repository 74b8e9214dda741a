// The adopted mode's one hold and give-back, for every kind whose facts say it has one (`adopted`) and whose
// applier says how one is found (`found`): on an adopted node what the host already has is the host's, held
// as found until a declaration takes it, and given back as found when undeclared. The applier never sees a
// held resource: it decides only what the mesh makes.
import * as z from "zod";
import type { DecideContext, Executed, RecordBase, Step } from "../appliers/index.ts";
import type { Host } from "../hosts/index.ts";
import { factsOf, pathsOf, type Resource } from "../vocabulary/index.ts";

/** The record of a resource held as found: nothing of it is the mesh's, so it says only that. */
const HeldRecord = z.strictObject({
  type: z.string(),
  held_as_found: z.literal(true),
  pending: z.boolean().optional(),
});
type HeldRecord = z.infer<typeof HeldRecord>;

/** The two steps the apply itself carries out: no applier is asked to run them. */
export type AdoptedStep = Step & { action: "hold-as-found" | "give-back-as-found"; by: "apply" };

/** Whether `record` is a hold's (parsed, not trusted: records come from disk), never an applier's own. */
export const isHeldRecord = (record: RecordBase | undefined): boolean => HeldRecord.safeParse(record).success;

export const isAdoptedStep = (step: Step): step is AdoptedStep => "by" in step && step.by === "apply";

const where = (r: Resource): string => pathsOf(r)[0] ?? r.id;

/**
 * The hold for `r`, or undefined when its applier decides: on an adopted node, not taken, and either held
 * before (held once held) or found by its applier with no record of the mesh's.
 */
export async function holdOf(
  host: Host,
  r: Resource,
  record: RecordBase | undefined,
  ctx: DecideContext,
): Promise<AdoptedStep | undefined> {
  const takes = factsOf(r.type).adopted?.takes;
  const found = host.appliers.get(r.type)?.traits?.found;
  if (ctx.mode !== "adopted" || !takes || !found || takes(r)) return undefined;
  if (record && !isHeldRecord(record)) return undefined;
  if (!record && !(await found(r, ctx))) return undefined;
  const detail = `${where(r)} held: found on this adopted node (takes: true makes it the mesh's)`;
  return { id: r.id, type: r.type, did: "unchanged", action: "hold-as-found", detail, by: "apply" };
}

/** The give-back of a held record no longer declared: nothing of it was the mesh's, so nothing is touched. */
export function giveBackOf(id: string, record: RecordBase): AdoptedStep | undefined {
  if (!isHeldRecord(record)) return undefined;
  const detail = `given back as found: it was the host's, and nothing of it was changed`;
  return { id, type: record.type, did: "unchanged", action: "give-back-as-found", detail, by: "apply" };
}

/** What a hold or give-back came to: the held record kept, or forgotten. */
export function executeAdopted(step: AdoptedStep): Executed<HeldRecord> {
  const record: HeldRecord | null =
    step.action === "hold-as-found" ? { type: step.type, held_as_found: true } : null;
  return { did: step.did, detail: step.detail, record };
}
