// `mesh move NAME --to DIR2`: the sealed membership move of protocol.md. The node's place in the other mesh
// (made by `init`, its bus up) is made first, in that mesh's buckets, with the public keys this mesh recorded;
// then this mesh pushes the node's last declaration once more, carrying the new membership sealed to it. The
// node applies it, reports here, and restarts dialling the other bus; this mesh keeps its record (the node comes
// back if the other bus will not hold it) until `node rm`.
import { resolve } from "node:path";
import { seal } from "../vocabulary/index.ts";
import { nodeUserJwt, userOfIdentity } from "./accounts.ts";
import { revocationsOnBus } from "./claims.ts";
import { membershipOf } from "./controller.ts";
import { Conflict } from "./kv.ts";
import { MeshDir, MeshRefused } from "./layout.ts";
import { newRecord } from "./nodes.ts";
import { type Composed, compose, preparePush } from "./push.ts";
import { issuedAfter, NO_REVOCATIONS } from "./revocations.ts";
import { shardOf } from "./shards.ts";
import { changeNode, knownNode, type State, withState } from "./state.ts";

export async function prepareMove(
  mesh: MeshDir,
  state: State,
  name: string,
  toDir: string,
): Promise<{ composed: Composed[]; to: MeshDir }> {
  const record = (await knownNode(state, name)).value;
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
  const user = userOfIdentity(record.keys.identity);
  if (!user) throw new MeshRefused(`node ${name}'s identity key is not an Ed25519 public key`);
  const placed = {
    ...newRecord(name),
    keys: record.keys,
    facts: record.facts,
    labels: record.labels,
    enrolled_at: new Date().toISOString(),
    account: shardOf(name),
  };
  const membership = membershipOf(name, {
    servers: to.urls(),
    fingerprint: toConfig.fingerprint,
    meshKey: toConfig.mesh_key,
    // the node's shard in the target mesh issues its user there, for the same identity key
    jwt: nodeUserJwt(
      to.accountKeys(),
      name,
      user,
      issuedAfter(await revocationsOnBus(to, shardOf(name)).catch(() => NO_REVOCATIONS), user),
    ),
  });
  const sealed = seal(Buffer.from(JSON.stringify(membership)), record.keys.sealing);
  const input = { file: record.last_body, secrets: new Map<string, Uint8Array>() };
  compose(record, input, { membership: sealed });
  const composed = await preparePush(
    state,
    [name],
    input,
    () => ({ membership: sealed }),
    () =>
      withState(to, async (other) => {
        await other.nodes.create(name, placed).catch((e) => {
          if (e instanceof Conflict)
            throw new MeshRefused(`node ${name} is already in the mesh at ${to.dir}`);
          throw e;
        });
      }),
  );
  return { composed, to };
}

/** Once the node has applied the move: this mesh stops counting it among its own. */
export async function markMoved(state: State, name: string, to: MeshDir): Promise<void> {
  await changeNode(state, name, (record) => ({ value: { ...record, moved_to: to.dir }, result: undefined }));
}
