// The mesh's state as a test reads it: from the buckets on the bus (src/mesh/state.ts), as any operator console
// would, never from a file of the mesh directory.
import { type CodeRecord, MeshDir, type NodeRecord, withState } from "../../src/mesh/index.ts";

/** The node's record in mesh-nodes; throws when there is none. */
export async function nodeRecord(dir: string, node: string): Promise<NodeRecord> {
  const entry = await withState(new MeshDir(dir), (s) => s.nodes.get(node));
  if (!entry) throw new Error(`no record of node ${node} in mesh-nodes`);
  return entry.value;
}

export async function hasNode(dir: string, node: string): Promise<boolean> {
  return (await withState(new MeshDir(dir), (s) => s.nodes.get(node))) !== null;
}

/** The node's code in mesh-codes, or null when it has none (never made, or withdrawn). */
export async function codeRecord(dir: string, node: string): Promise<CodeRecord | null> {
  return (await withState(new MeshDir(dir), (s) => s.codes.get(node)))?.value ?? null;
}
