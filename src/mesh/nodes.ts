// `mesh node add` and `node rm`: a node's record, its enrolling user, its consumer — made or revoked under the
// directory's lock. No server file is rewritten and no server reloaded: the code carries the enrolling user's JWT
// (signed by NODES' key), and `rm` revokes through NODES' revocations, pushed over the system account.
import { generateKeyPairSync } from "node:crypto";

import { ENROL_EXPIRES_MAX_S, ENROL_EXPIRES_S, MESH_FORMAT } from "../defaults.ts";
import { encodeCode, NodeName, nkeyOf, printable, seedOf } from "../vocabulary/index.ts";
import { enrolUserJwt, userOfIdentity } from "./accounts.ts";
import { connectBus, dropNode, ensureNodeConsumer } from "./bus.ts";
import { type Revoke, revokeOnBus } from "./claims.ts";
import { lockMesh } from "./files.ts";
import { type MeshDir, MeshRefused, type NodeRecord } from "./layout.ts";
import { runningServers } from "./servers.ts";

export function checkNodeName(name: string | undefined): string {
  if (!name) throw new MeshRefused("a NAME is needed");
  if (!NodeName.safeParse(name).success)
    throw new MeshRefused(
      `node name "${printable(name, 64)}" must match ^[a-z0-9][a-z0-9_-]{0,62}$ (a node name takes no dot)`,
    );
  return name;
}

export function newRecord(node: string, enrol: NodeRecord["enrol"] = null): NodeRecord {
  return {
    format: MESH_FORMAT,
    node,
    enrol,
    added_at: new Date().toISOString(),
    enrolled_at: null,
    keys: null,
    facts: null,
    serial: 0,
    pushes: [],
    last_body: null,
    moved_to: null,
  };
}

/** A new enrolling user for `node`: its key made now, its JWT expiring with the code. */
function enrolling(mesh: MeshDir, node: string, expiresS: number) {
  const pair = generateKeyPairSync("ed25519");
  const user = nkeyOf("user", pair.publicKey);
  const exp = Math.floor(Date.now() / 1000) + expiresS;
  const jwt = enrolUserJwt(mesh.accountKeys(), node, user, exp);
  return { user, exp, jwt, seed: seedOf("user", pair.privateKey) };
}

/** Its enrolment code: where, which certificate, which bus, and the enrolling user (cli.md). Never logged. */
function codeOf(mesh: MeshDir, node: string, credential: { jwt: string; seed: string }): string {
  const config = mesh.config();
  return encodeCode({
    node,
    servers: mesh.urls(),
    fingerprint: config.fingerprint,
    transport: "nats",
    ...credential,
  });
}

/** `--expires`: seconds, within the bounds; refused in one line otherwise. */
export function checkExpires(seconds: number | undefined): number {
  const s = seconds ?? ENROL_EXPIRES_S;
  if (!Number.isInteger(s) || s < 60 || s > ENROL_EXPIRES_MAX_S)
    throw new MeshRefused(`--expires must be from 1m to ${ENROL_EXPIRES_MAX_S / 86400}d`);
  return s;
}

/** Add the node; the code that enrols it. Nothing is left behind when the servers will not take the list. */
export async function addNode(mesh: MeshDir, name: string, expiresS?: number): Promise<string> {
  checkNodeName(name);
  const life = checkExpires(expiresS);
  mesh.config();
  const lock = await lockMesh(mesh.dir);
  const user = enrolling(mesh, name, life);
  try {
    if (mesh.node(name)) throw new MeshRefused(`node ${name} is already in this mesh`);
    mesh.writeNode(newRecord(name, { user: user.user, expires_at: new Date(user.exp * 1000).toISOString() }));
  } finally {
    lock.release();
  }
  // made now when the bus is up; otherwise `up` makes it when the node asks
  if (runningServers(mesh).length)
    await withBus(mesh, (bus) => ensureNodeConsumer(bus, name)).catch(() => undefined);
  return codeOf(mesh, name, { jwt: user.jwt, seed: user.seed });
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
 * Revoke the node on the running bus (its live connection is cut at once), then forget it; its consumer and
 * declarations go from the bus. A bus that does not answer is refused with nothing changed: a record removed
 * without its revocation would leave a user nobody can revoke.
 */
export async function removeNode(mesh: MeshDir, name: string): Promise<void> {
  checkNodeName(name);
  const lock = await lockMesh(mesh.dir);
  try {
    const record = mesh.known(name);
    const revokes = revokesOf(record);
    if (revokes.length) await revokeOnBus(mesh, revokes);
    mesh.removeNode(name);
  } finally {
    lock.release();
  }
  // with the bus down, `up` sweeps the consumer of a node that has no record when it starts
  if (runningServers(mesh).length) await withBus(mesh, (bus) => dropNode(bus, name)).catch(() => undefined);
}

export async function withBus<T>(
  mesh: MeshDir,
  use: (bus: Awaited<ReturnType<typeof connectBus>>) => Promise<T>,
): Promise<T> {
  const bus = await connectBus(mesh);
  try {
    return await use(bus);
  } finally {
    await bus.close();
  }
}
