// `mesh node add` and `node rm`: a node's record and its enrolment code in the mesh's buckets, its consumer on
// the bus; from any copy of the mesh directory. Every `mesh up` hears the change and gives its own servers the
// node's users (users.ts says how this command knows they have).

import { CODE_EXPIRES_S, MESH_FORMAT } from "../defaults.ts";
import { encodeCode, NodeName, printable } from "../vocabulary/index.ts";
import { dropNode, ensureNodeConsumer } from "./bus.ts";
import { secret } from "./init.ts";
import { Conflict } from "./kv.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import { type CodeRecord, knownNode, type NodeRecord, withState } from "./state.ts";
import { awaitRendered } from "./users.ts";

export function checkNodeName(name: string | undefined): string {
  if (!name) throw new MeshRefused("a NAME is needed");
  if (!NodeName.safeParse(name).success)
    throw new MeshRefused(
      `node name "${printable(name, 64)}" must match ^[a-z0-9][a-z0-9_-]{0,62}$ (a node name takes no dot)`,
    );
  return name;
}

export function newRecord(node: string, now = new Date()): NodeRecord {
  return {
    format: MESH_FORMAT,
    node,
    password: secret(),
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

export function newCode(node: string, expiresS = CODE_EXPIRES_S, now = new Date()): CodeRecord {
  return {
    node,
    token: secret(),
    added_at: now.toISOString(),
    expires_at: new Date(now.getTime() + expiresS * 1000).toISOString(),
    spent: null,
  };
}

/** Its enrolment code: where, which certificate, which bus, and the token (cli.md). Never logged. */
export function codeOf(mesh: MeshDir, code: CodeRecord): string {
  return encodeCode({
    node: code.node,
    servers: mesh.urls(),
    fingerprint: mesh.config().fingerprint,
    transport: "nats",
    token: code.token,
  });
}

/**
 * Add the node: its record made only if the name is free (compare-and-set: two operators adding one name get
 * one node and one refusal), its code beside it, its consumer; then the servers that answer take its users.
 * The code, and the servers that had not taken the users in time (their `mesh up` is not running).
 */
export async function addNode(
  mesh: MeshDir,
  name: string,
  expiresS = CODE_EXPIRES_S,
  labels: Record<string, string> = {},
): Promise<{ code: string; late: string[] }> {
  checkNodeName(name);
  mesh.config();
  return await withState(mesh, async (state) => {
    const nodes = await state.nodes.create(name, { ...newRecord(name), labels }).catch((e) => {
      if (e instanceof Conflict) throw new MeshRefused(`node ${name} is already in this mesh`);
      throw e;
    });
    const code = newCode(name, expiresS);
    let codes: number;
    try {
      codes = await state.codes.put(name, code);
      await ensureNodeConsumer(state.bus, name);
    } catch (e) {
      await state.nodes.remove(name).catch(() => undefined);
      throw e;
    }
    const late = await awaitRendered(mesh, state.bus.nc, { nodes, codes });
    return { code: codeOf(mesh, code), late };
  });
}

/**
 * Revoke the node: its record, code and fleet entry go from the buckets, its consumer and declarations from the
 * bus; the servers that answer drop its users (its live connection is cut). The servers that had not in time.
 */
export async function removeNode(mesh: MeshDir, name: string): Promise<string[]> {
  checkNodeName(name);
  mesh.config();
  return await withState(mesh, async (state) => {
    const { revision } = await knownNode(state, name);
    const nodes = await state.nodes.remove(name, revision).catch((e) => {
      if (e instanceof Conflict)
        throw new MeshRefused(`node ${name} changed while it was removed: try again`);
      throw e;
    });
    const codes = await state.codes.remove(name);
    await state.fleet.remove(name);
    await dropNode(state.bus, name);
    return await awaitRendered(mesh, state.bus.nc, { nodes, codes });
  });
}

/**
 * A new one-time code for a node whose code was lost, expired or never used, or whose machine enrols again (its
 * state lost, or `enrol --replace` after a removal undone by `node add`). An enrolled node's password is replaced
 * too, so whoever holds the old machine's state can no longer dial; its keys stay until the next enrolment
 * replaces them, and its serial goes on.
 */
export async function reissueNode(
  mesh: MeshDir,
  name: string,
  expiresS = CODE_EXPIRES_S,
): Promise<{ code: string; late: string[]; enrolled: boolean }> {
  checkNodeName(name);
  mesh.config();
  return await withState(mesh, async (state) => {
    const { value, revision } = await knownNode(state, name);
    if (value.moved_to)
      throw new MeshRefused(`node ${name} has moved to the mesh at ${value.moved_to}: reissue it there`);
    const nodes = value.keys
      ? await state.nodes.update(name, { ...value, password: secret() }, revision).catch((e) => {
          if (e instanceof Conflict)
            throw new MeshRefused(`node ${name} changed while it was reissued: try again`);
          throw e;
        })
      : revision;
    const code = newCode(name, expiresS);
    const codes = await state.codes.put(name, code);
    const late = await awaitRendered(mesh, state.bus.nc, { nodes, codes });
    return { code: codeOf(mesh, code), late, enrolled: value.keys !== null };
  });
}
