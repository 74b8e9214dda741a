// `mesh move NAME --to DIR2`: the sealed membership move of protocol.md. The node's place in the other mesh
// (made by `init`) is made first, with the public keys this mesh recorded; then this mesh pushes the node's
// last declaration once more, carrying the new membership sealed to it. The node applies it, reports here, and
// restarts dialling the other bus; this mesh keeps its record (the node comes back if the other bus will not
// hold it) until `node rm`.
import { resolve } from "node:path";
import { seal } from "../vocabulary/index.ts";
import { nodeUserJwt, userOfIdentity } from "./accounts.ts";
import { ensureNodeConsumer } from "./bus.ts";
import { membershipOf } from "./controller.ts";
import { lockMesh } from "./files.ts";
import { MeshDir, MeshRefused } from "./layout.ts";
import { newRecord, withBus } from "./nodes.ts";
import { type Composed, compose, preparePush } from "./push.ts";
import { runningServers } from "./servers.ts";

export async function prepareMove(
  mesh: MeshDir,
  name: string,
  toDir: string,
): Promise<{ composed: Composed[]; bus: Awaited<ReturnType<typeof preparePush>>["bus"]; to: MeshDir }> {
  const record = mesh.known(name);
  if (!record.keys) throw new MeshRefused(`node ${name} has not enrolled yet: it has nothing to move`);
  if (record.moved_to)
    throw new MeshRefused(`node ${name} has moved already, to the mesh at ${record.moved_to}`);
  if (!record.last_body)
    throw new MeshRefused(
      `node ${name} has had no declaration from this mesh: a move carries its last one, so push one first`,
    );
  const to = new MeshDir(resolve(toDir));
  const toConfig = to.config();
  if (to.dir === resolve(mesh.dir) || toConfig.mesh_key === mesh.config().mesh_key)
    throw new MeshRefused(`--to ${toDir} is this mesh`);
  if (to.node(name)) throw new MeshRefused(`node ${name} is already in the mesh at ${to.dir}`);
  const user = userOfIdentity(record.keys.identity);
  if (!user) throw new MeshRefused(`node ${name}'s identity key is not an Ed25519 public key`);
  const placed = {
    ...newRecord(name),
    keys: record.keys,
    facts: record.facts,
    enrolled_at: new Date().toISOString(),
  };
  const membership = membershipOf(name, {
    servers: to.urls(),
    fingerprint: toConfig.fingerprint,
    meshKey: toConfig.mesh_key,
    // the target mesh's NODES account issues the node's user there, for the same identity key
    jwt: nodeUserJwt(to.accountKeys(), name, user),
  });
  const sealed = seal(Buffer.from(JSON.stringify(membership)), record.keys.sealing);
  const input = { file: record.last_body, secrets: new Map<string, Uint8Array>() };
  compose(record, input, { membership: sealed });
  const { bus, composed } = await preparePush(
    mesh,
    [name],
    input,
    () => ({ membership: sealed }),
    async () => {
      const lock = await lockMesh(to.dir);
      try {
        if (to.node(name)) throw new MeshRefused(`node ${name} is already in the mesh at ${to.dir}`);
        to.writeNode(placed);
      } finally {
        lock.release();
      }
      if (runningServers(to).length)
        await withBus(to, (b) => ensureNodeConsumer(b, name)).catch(() => undefined);
    },
  );
  return { composed, bus, to };
}

/** Once the node has applied the move: this mesh stops counting it among its own. */
export async function markMoved(mesh: MeshDir, name: string, to: MeshDir): Promise<void> {
  const lock = await lockMesh(mesh.dir);
  try {
    const record = mesh.known(name);
    mesh.writeNode({ ...record, moved_to: to.dir });
  } finally {
    lock.release();
  }
}
