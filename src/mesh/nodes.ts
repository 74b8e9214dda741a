// `mesh node add` and `node rm`: a node's users, its one-time token, its consumer, its record — made or
// revoked under the directory's lock, the running servers reloaded (never restarted).

import { MESH_FORMAT } from "../defaults.ts";
import { encodeCode, NodeName, printable } from "../vocabulary/index.ts";
import { connectBus, dropNode, ensureNodeConsumer } from "./bus.ts";
import { lockMesh } from "./files.ts";
import { secret } from "./init.ts";
import { type MeshDir, MeshRefused, type NodeRecord } from "./layout.ts";
import { reloadUsers, runningServers } from "./servers.ts";

export function checkNodeName(name: string | undefined): string {
  if (!name) throw new MeshRefused("a NAME is needed");
  if (!NodeName.safeParse(name).success)
    throw new MeshRefused(
      `node name "${printable(name, 64)}" must match ^[a-z0-9][a-z0-9_-]{0,62}$ (a node name takes no dot)`,
    );
  return name;
}

export function newRecord(node: string): NodeRecord {
  return {
    format: MESH_FORMAT,
    node,
    password: secret(),
    token: secret(),
    added_at: new Date().toISOString(),
    enrolled_at: null,
    keys: null,
    facts: null,
    labels: {},
    serial: 0,
    pushes: [],
    last_body: null,
    moved_to: null,
  };
}

/** Its enrolment code: where, which certificate, which bus, and the token (cli.md). Never logged. */
export function codeOf(mesh: MeshDir, record: NodeRecord): string {
  const config = mesh.config();
  if (!record.token) throw new MeshRefused(`node ${record.node} has enrolled: its token is spent`);
  return encodeCode({
    node: record.node,
    servers: mesh.urls(),
    fingerprint: config.fingerprint,
    transport: "nats",
    token: record.token,
  });
}

/** Add the node; the code that enrols it. Nothing is left behind when the servers will not take the list. */
export async function addNode(
  mesh: MeshDir,
  name: string,
  labels: Record<string, string> = {},
): Promise<string> {
  checkNodeName(name);
  mesh.config();
  const lock = await lockMesh(mesh.dir);
  let record: NodeRecord;
  try {
    if (mesh.node(name)) throw new MeshRefused(`node ${name} is already in this mesh`);
    record = { ...newRecord(name), labels };
    mesh.writeNode(record);
    try {
      await reloadUsers(mesh);
    } catch (e) {
      mesh.removeNode(name);
      await reloadUsers(mesh).catch(() => undefined);
      throw e;
    }
  } finally {
    lock.release();
  }
  // made now when the bus is up; otherwise `up` makes it when the node asks
  if (runningServers(mesh).length)
    await withBus(mesh, (bus) => ensureNodeConsumer(bus, name)).catch(() => undefined);
  return codeOf(mesh, record);
}

/** Revoke the node: its users go from every running server, its consumer and declarations from the bus. */
export async function removeNode(mesh: MeshDir, name: string): Promise<void> {
  checkNodeName(name);
  const lock = await lockMesh(mesh.dir);
  try {
    mesh.known(name);
    mesh.removeNode(name);
    await reloadUsers(mesh);
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
