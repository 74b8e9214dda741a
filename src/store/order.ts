// The signed order (protocol.md, "The signed order"): per mesh key, the highest serial the node accepted and
// its body's digest, kept durably before the apply begins. A signature says who, not when: without this, anyone
// who can publish on the node's subject replays an older envelope, byte for byte, and rolls the node back.
// The one place a delivery is judged by its order; the hold asks, and never decides it itself.
import * as z from "zod";
import type { Declaration, Refusal } from "../vocabulary/index.ts";
import type { State } from "./state.ts";

const ORDER_FILE = "order.json";

const Accepted = z.object({
  serial: z.number().int().min(1),
  digest: z.string(),
  issued_at: z.string(),
  accepted_at: z.string(),
});
export type Accepted = z.infer<typeof Accepted>;

const OrderFile = z.object({ format: z.number().int(), meshes: z.record(z.string(), Accepted) });

/** Newer: kept before this returns. Redelivery: the same serial and body again (a kill mid-apply, a republish). */
export type Admitted = { ok: true; as: "newer" | "redelivery" } | { ok: false; refusal: Refusal };

/** The highest serial accepted from the mesh whose key is `meshKey`, if any. */
export function acceptedOf(state: State, meshKey: string): Accepted | null {
  return state.readVersioned(ORDER_FILE, OrderFile)?.meshes[meshKey] ?? null;
}

/**
 * Judge a verified declaration from the link by its signed order, and keep a newer one (written and fsynced)
 * before the caller applies it. `dryRun` judges without keeping. No expiry: `issued_at` never refuses, since a
 * node away for a month must still take the newest, and the node's clock is not trusted to judge the mesh's.
 */
export function admitInOrder(
  state: State,
  meshKey: string,
  declaration: Declaration,
  digest: string,
  dryRun = false,
): Admitted {
  const { serial, issued_at } = declaration;
  if (serial === undefined) return refused("serial", "is required of a declaration from the mesh");
  if (issued_at === undefined) return refused("issued_at", "is required of a declaration from the mesh");
  const kept = acceptedOf(state, meshKey);
  if (kept && serial < kept.serial)
    return refused("serial", `serial ${serial} is older than ${kept.serial}, the newest accepted`);
  if (kept && serial === kept.serial)
    return kept.digest === digest
      ? { ok: true, as: "redelivery" }
      : refused(
          "serial",
          `serial ${serial} was accepted already with another body: the mesh signs each once`,
        );
  if (!dryRun) keep(state, meshKey, { serial, digest, issued_at, accepted_at: new Date().toISOString() });
  return { ok: true, as: "newer" };
}

/**
 * A node enrolled again (`enrol --replace`) starts a new order with that mesh: a node removed and added again has
 * a new record whose serials start at 1. Declarations of the old order were addressed to the old keys.
 */
export function forgetOrder(state: State, meshKey: string): void {
  const meshes = { ...(state.readVersioned(ORDER_FILE, OrderFile)?.meshes ?? {}) };
  if (!(meshKey in meshes)) return;
  delete meshes[meshKey];
  state.writeVersioned(ORDER_FILE, { meshes });
}

// Every mesh's order is kept, not only the current one's: a node moved away and back keeps refusing what the
// first mesh superseded.
function keep(state: State, meshKey: string, accepted: Accepted): void {
  const meshes = state.readVersioned(ORDER_FILE, OrderFile)?.meshes ?? {};
  state.writeVersioned(ORDER_FILE, { meshes: { ...meshes, [meshKey]: accepted } });
}

function refused(field: string, reason: string): Admitted {
  return { ok: false, refusal: { id: "declaration", field, reason } };
}
