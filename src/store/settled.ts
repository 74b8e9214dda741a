// The last declaration settled, per mesh key (protocol.md "Direct reads"): a node that reads its declaration directly
// has no consumer to ack, so what a consumer's ack floor kept for it is kept here. A sequence is settled only once
// its report is in the outbox, so a crash before that reads the same declaration again at the next start, as a
// consumer redelivers an unacked message. Per mesh key: a node moved to another mesh never compares one stream's
// sequences with another's. Not forgotten at `enrol --replace`: the mesh's stream keeps counting up.
import * as z from "zod";
import type { State } from "./state.ts";

const SETTLED_FILE = "settled.json";

const SettledFile = z.object({
  format: z.number().int(),
  meshes: z.record(z.string(), z.object({ seq: z.number().int().min(1), settled_at: z.string() })),
});

/** The stream sequence of the last declaration settled from the mesh whose key is `meshKey`, or 0. */
export function settledOf(state: State, meshKey: string): number {
  return state.readVersioned(SETTLED_FILE, SettledFile)?.meshes[meshKey]?.seq ?? 0;
}

/** Keep `seq` as settled (written and fsynced) before this returns. */
export function keepSettled(state: State, meshKey: string, seq: number): void {
  const meshes = state.readVersioned(SETTLED_FILE, SettledFile)?.meshes ?? {};
  const settled = { seq, settled_at: new Date().toISOString() };
  state.writeVersioned(SETTLED_FILE, { meshes: { ...meshes, [meshKey]: settled } });
}
