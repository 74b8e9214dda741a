// What a node said, as the mesh believes it: the one place on the mesh's side that reads a report, a heartbeat or
// a rekey off the bus. A subject says only where a message was published; the message is the node's when it is
// signed by the identity key the node enrolled with (src/vocabulary/signed.ts), and only then. What does not
// verify is dropped — never shown as the node's, never written to the fleet view — and counted per node by
// `mesh up`, so an operator can see that someone is speaking as a node (`mesh nodes`, and `mesh up`'s log: at
// once, then at most once a minute with how many more).
// Pure: the callers (up, watch, push's wait) find the node's record their own way (memory, the bucket).
import { type NodeMessageKind, type NodeSaid, verifyNodeMessage } from "../vocabulary/index.ts";
import type { NodeRecord } from "./state.ts";

export type HeardFrom<K extends NodeMessageKind> =
  | { ok: true; node: string; value: NodeSaid[K] }
  | { ok: false; node: string; reason: string };

/** The identity key a node's messages are verified by: the one its record says it enrolled with, if it has. */
export function identityOf(record: NodeRecord | null | undefined): string | null {
  return record?.keys?.identity ?? null;
}

/** The message on `node`'s subject, verified against `identity` (identityOf its record). */
export function heardFrom<K extends NodeMessageKind>(
  node: string,
  identity: string | null,
  data: Uint8Array,
  kind: K,
): HeardFrom<K> {
  if (!identity)
    return { ok: false, node, reason: `node ${node} has not enrolled: it has no identity key yet` };
  const verified = verifyNodeMessage(data, kind, node, identity);
  return verified.ok
    ? { ok: true, node, value: verified.value }
    : { ok: false, node, reason: verified.reason };
}
