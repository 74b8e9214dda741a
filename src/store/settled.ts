// What a node reading directly (protocol.md "Direct reads") last settled from each mesh: the stream sequence and
// the server's time of the declaration it applied, or refused, and reported. No consumer remembers it for the node,
// so this does: the next read at a start or a dial yields only what is newer, so a declaration is applied and
// reported once, as a consumer's ack made it. Kept only once the report is in the outbox (the run loop settles
// then): a kill before that reads it again, as a consumer redelivers an unacked one.
import * as z from "zod";
import { StreamMark } from "../vocabulary/index.ts";
import type { State } from "./state.ts";

const SETTLED_FILE = "settled.json";

const SettledFile = z.object({ format: z.number().int(), meshes: z.record(z.string(), StreamMark) });

/** The declaration last settled from the mesh whose key is `meshKey`, if any. */
export function settledOf(state: State, meshKey: string): StreamMark | null {
  return state.readVersioned(SETTLED_FILE, SettledFile)?.meshes[meshKey] ?? null;
}

/** Keep `settled` as the last settled from that mesh (written whole and fsynced, as every state file). */
export function keepSettled(state: State, meshKey: string, settled: StreamMark): void {
  const meshes = state.readVersioned(SETTLED_FILE, SettledFile)?.meshes ?? {};
  state.writeVersioned(SETTLED_FILE, { meshes: { ...meshes, [meshKey]: settled } });
}

/** A node enrolled again starts afresh with that mesh (order.ts forgetOrder says why). */
export function forgetSettled(state: State, meshKey: string): void {
  const meshes = { ...(state.readVersioned(SETTLED_FILE, SettledFile)?.meshes ?? {}) };
  if (!(meshKey in meshes)) return;
  delete meshes[meshKey];
  state.writeVersioned(SETTLED_FILE, { meshes });
}
