// What a node said, as the mesh believes it: the one place on the mesh's side that reads a report, a heartbeat or
// a rekey off the bus. A subject says only where a message was published; the message is the node's when it is
// signed by the identity key the node enrolled with (src/vocabulary/signed.ts), and only then. What does not
// verify is dropped — never shown as the node's, never written to the fleet view — and counted per node, so an
// operator can see that someone is speaking as a node (`mesh nodes --json`, and `mesh up`'s log once a minute).
import {
  type NodeMessageKind,
  NodeName,
  type NodeSaid,
  printable,
  verifyNodeMessage,
} from "../vocabulary/index.ts";
import type { MeshDir, NodeRecord } from "./layout.ts";

export type HeardFrom<K extends NodeMessageKind> =
  | { ok: true; node: string; record: NodeRecord; value: NodeSaid[K] }
  /** `node` null: the subject names no node of this mesh (removed, never added): nothing to count it against. */
  | { ok: false; node: string | null; reason: string };

/** The message on `subject` (`mesh.<kind>.<node>`), verified against that node's enrolled identity key. */
export function heardFrom<K extends NodeMessageKind>(
  mesh: MeshDir,
  subject: string,
  data: Uint8Array,
  kind: K,
): HeardFrom<K> {
  const [mesh_, said, node, ...rest] = subject.split(".");
  if (mesh_ !== "mesh" || said !== kind || !node || rest.length || !NodeName.safeParse(node).success)
    return { ok: false, node: null, reason: `${printable(subject, 80)} is not a ${kind} subject` };
  const record = mesh.node(node);
  // a node removed is no longer read, and one never added has no key to verify by
  if (!record) return { ok: false, node: null, reason: `node ${node} is not in this mesh` };
  if (!record.keys)
    return { ok: false, node, reason: `node ${node} has not enrolled: it has no identity key yet` };
  const verified = verifyNodeMessage(data, kind, node, record.keys.identity);
  if (!verified.ok) return { ok: false, node, reason: verified.reason };
  return { ok: true, node, record, value: verified.value };
}

/** Dropped messages, by node: the total since `up` started, and what is not yet said in the log. */
export class Drops {
  private readonly unsaid = new Map<string, { count: number; kinds: Set<string>; reason: string }>();

  /** Count a drop against its node; false when it names no node of this mesh (nothing to count it against). */
  count(heard: { node: string | null; reason: string }, kind: NodeMessageKind): boolean {
    if (heard.node === null) return false;
    const entry = this.unsaid.get(heard.node) ?? { count: 0, kinds: new Set<string>(), reason: "" };
    entry.count++;
    entry.kinds.add(kind);
    entry.reason = heard.reason;
    this.unsaid.set(heard.node, entry);
    return true;
  }

  /** One line for the log of what was dropped since it was last said; null when nothing was. */
  said(sinceS: number): string | null {
    if (!this.unsaid.size) return null;
    const parts = [...this.unsaid].map(
      ([node, e]) => `${node}: ${e.count} (${[...e.kinds].join(", ")}; last: ${e.reason})`,
    );
    const total = [...this.unsaid.values()].reduce((n, e) => n + e.count, 0);
    this.unsaid.clear();
    return `dropped ${total} message(s) in the last ${sinceS} s not signed by the node they name: ${parts.join("; ")}`;
  }
}
