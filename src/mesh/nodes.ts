// `mesh node add` and `node rm`: a node's record and its enrolment code in the mesh's buckets, its consumer on
// the bus; from any copy of the mesh directory. No server file is rewritten and no server reloaded: the code
// carries an enrolling user's JWT (signed by NODES' key, expiring with the code), and `rm` revokes through NODES'
// revocations, pushed over the system account.
import { generateKeyPairSync } from "node:crypto";
import { CODE_EXPIRES_S, MESH_FORMAT } from "../defaults.ts";
import { printable } from "../printable.ts";
import { encodeCode, NodeName, nkeyOf, seedOf } from "../vocabulary/index.ts";
import { enrolUserJwt, userOfIdentity } from "./accounts.ts";
import { dropNode, ensureNodeConsumer } from "./bus.ts";
import { type Revoke, revokeOnBus } from "./claims.ts";
import { Conflict } from "./kv.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import { type CodeRecord, knownNode, type NodeRecord, withState } from "./state.ts";

export function checkNodeName(name: string | undefined): string {
  if (!name) throw new MeshRefused("a NAME is needed");
  if (!NodeName.safeParse(name).success)
    throw new MeshRefused(
      `node name "${printable(name, 64)}" must match ^[a-z0-9][a-z0-9_-]{0,62}$ (a node name takes no dot)`,
    );
  return name;
}

export function newRecord(node: string, now = new Date(), enrol: NodeRecord["enrol"] = null): NodeRecord {
  return {
    format: MESH_FORMAT,
    node,
    enrol,
    added_at: now.toISOString(),
    enrolled_at: null,
    keys: null,
    labels: {},
    facts: null,
    serial: 0,
    pushes: [],
    last_body: null,
    moved_to: null,
  };
}

/** A new code: its enrolling user's key made now, its JWT expiring with it. The record keeps the user alone. */
export function newCode(mesh: MeshDir, node: string, expiresS = CODE_EXPIRES_S, now = new Date()) {
  const pair = generateKeyPairSync("ed25519");
  const user = nkeyOf("user", pair.publicKey);
  const exp = Math.floor(now.getTime() / 1000) + expiresS;
  const record: CodeRecord = {
    node,
    user,
    added_at: now.toISOString(),
    expires_at: new Date(exp * 1000).toISOString(),
    spent: null,
  };
  const jwt = enrolUserJwt(mesh.accountKeys(), node, user, exp);
  return { record, credential: { jwt, seed: seedOf("user", pair.privateKey) } };
}

/** The record's note of its pending enrolling user. */
export function enrolOf(code: CodeRecord): NonNullable<NodeRecord["enrol"]> {
  return { user: code.user, expires_at: code.expires_at };
}

/** Its enrolment code: where, which certificate, which bus, and the enrolling user (cli.md). Never logged. */
export function codeOf(mesh: MeshDir, node: string, credential: { jwt: string; seed: string }): string {
  return encodeCode({
    node,
    servers: mesh.urls(),
    fingerprint: mesh.config().fingerprint,
    transport: "nats",
    ...credential,
  });
}

/** What revoking a node's record cuts off: its own user, and its enrolling user while the code is unspent. */
export function revokesOf(record: NodeRecord, at = Math.floor(Date.now() / 1000)): Revoke[] {
  const out: Revoke[] = [];
  const user = record.keys ? userOfIdentity(record.keys.identity) : null;
  if (user) out.push({ user, at, enrolling: false });
  if (record.enrol)
    out.push({
      user: record.enrol.user,
      at: Math.ceil(Date.parse(record.enrol.expires_at) / 1000),
      enrolling: true,
    });
  return out;
}

/**
 * Add the node: its record made only if the name is free (compare-and-set: two operators adding one name get
 * one node and one refusal), its code beside it, its consumer. The code works at once: its enrolling user is a
 * JWT the servers check against NODES' key, no list to render.
 */
export async function addNode(
  mesh: MeshDir,
  name: string,
  expiresS = CODE_EXPIRES_S,
  labels: Record<string, string> = {},
): Promise<string> {
  checkNodeName(name);
  mesh.config();
  const code = newCode(mesh, name, expiresS);
  return await withState(mesh, async (state) => {
    const record = { ...newRecord(name, new Date(), enrolOf(code.record)), labels };
    await state.nodes.create(name, record).catch((e) => {
      if (e instanceof Conflict) throw new MeshRefused(`node ${name} is already in this mesh`);
      throw e;
    });
    try {
      await state.codes.put(name, code.record);
      await ensureNodeConsumer(state.bus, name);
    } catch (e) {
      await state.nodes.remove(name).catch(() => undefined);
      throw e;
    }
    return codeOf(mesh, name, code.credential);
  });
}

/**
 * Revoke the node on the running bus (its live connection is cut at once), then forget it: its record, code and
 * fleet entry go from the buckets, its consumer and declarations from the bus. Revoked first: a record removed
 * without its revocation would leave a user nobody can revoke.
 */
export async function removeNode(mesh: MeshDir, name: string): Promise<void> {
  checkNodeName(name);
  mesh.config();
  await withState(mesh, async (state) => {
    const { value, revision } = await knownNode(state, name);
    const revokes = revokesOf(value);
    if (revokes.length) await revokeOnBus(mesh, revokes);
    await state.nodes.remove(name, revision).catch((e) => {
      if (e instanceof Conflict)
        throw new MeshRefused(`node ${name} changed while it was removed: try again`);
      throw e;
    });
    await state.codes.remove(name);
    await state.fleet.remove(name);
    await dropNode(state.bus, name);
  });
}

/**
 * A new one-time code for a node whose code was lost, expired or never used, or whose machine enrols again (its
 * state lost, or `enrol --replace` after a removal undone by `node add`): a new enrolling user. An enrolled node's
 * user (its identity key) is revoked too, and an earlier code's enrolling user, so whoever holds the old machine's
 * state or the old code can no longer dial; its keys stay until the next enrolment replaces them, and its serial
 * goes on.
 */
export async function reissueNode(
  mesh: MeshDir,
  name: string,
  expiresS = CODE_EXPIRES_S,
): Promise<{ code: string; enrolled: boolean }> {
  checkNodeName(name);
  mesh.config();
  return await withState(mesh, async (state) => {
    const { value, revision } = await knownNode(state, name);
    if (value.moved_to)
      throw new MeshRefused(`node ${name} has moved to the mesh at ${value.moved_to}: reissue it there`);
    const code = newCode(mesh, name, expiresS);
    const revokes = revokesOf(value);
    if (revokes.length) await revokeOnBus(mesh, revokes);
    await state.nodes.update(name, { ...value, enrol: enrolOf(code.record) }, revision).catch((e) => {
      if (e instanceof Conflict)
        throw new MeshRefused(`node ${name} changed while it was reissued: try again`);
      throw e;
    });
    await state.codes.put(name, code.record);
    return { code: codeOf(mesh, name, code.credential), enrolled: value.keys !== null };
  });
}
