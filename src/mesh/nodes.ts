// `mesh node add` and `node rm`: a node's record and its enrolment code in the mesh's buckets, its consumer on
// the bus; from any copy of the mesh directory. No server file is rewritten and no server reloaded: the code
// carries an enrolling user's JWT (signed by ENROL's key, expiring with the code), and `rm` revokes the node's user
// through NODES' revocations (a pending code's user through ENROL's), pushed over the system account.
import { generateKeyPairSync } from "node:crypto";
import {
  CODE_EXPIRES_S,
  ENROL_REVOKE_ALL_MARGIN_S,
  ENROL_SPENT_HOLD_MS,
  KV_CAS_TRIES,
  NODE_RECORD_FORMAT,
} from "../defaults.ts";
import { printable } from "../printable.ts";
import { encodeCode, NodeName, nkeyOf, seedOf } from "../vocabulary/index.ts";
import { enrolUserJwt, userOfIdentity } from "./accounts.ts";
import { dropNode } from "./bus.ts";
import { type Revoke, revokeOnBus } from "./claims.ts";
import { Conflict } from "./kv.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import { cutOff } from "./revocations.ts";
import { type CodeRecord, knownNode, type NodeRecord, nodesAccountOf, withState } from "./state.ts";

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
    format: NODE_RECORD_FORMAT,
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

/**
 * A new code: its enrolling user's key made now, a user of ENROL, its JWT issued at `now`'s second (the record's
 * `added_at`: ENROL's revocations name it) and expiring with it. The record keeps the user alone.
 */
export function newCode(mesh: MeshDir, node: string, expiresS = CODE_EXPIRES_S, now = new Date()) {
  const pair = generateKeyPairSync("ed25519");
  const user = nkeyOf("user", pair.publicKey);
  const iat = Math.floor(now.getTime() / 1000);
  const exp = iat + expiresS;
  const record: CodeRecord = {
    node,
    user,
    account: "ENROL",
    added_at: now.toISOString(),
    expires_at: new Date(exp * 1000).toISOString(),
    spent: null,
  };
  const jwt = enrolUserJwt(mesh.accountKeys(), node, user, exp, iat);
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

/** A code's enrolling user, revoked: in ENROL at its JWT's second; in NODES (issued before ENROL) to its expiry. */
export function codeRevoke(code: Pick<CodeRecord, "user" | "account" | "added_at" | "expires_at">): Revoke {
  return code.account === "ENROL"
    ? { user: code.user, at: issuedAtOf(code), enrolling: true, account: "ENROL" }
    : {
        user: code.user,
        at: Math.ceil(Date.parse(code.expires_at) / 1000),
        enrolling: true,
        account: "NODES",
      };
}

/** The second a code's JWT was issued at (newCode). */
export function issuedAtOf(code: Pick<CodeRecord, "added_at">): number {
  return Math.floor(Date.parse(code.added_at) / 1000);
}

/**
 * ENROL's floor (accounts.ts enrolRevoked), from the revocations it is to be pushed with: the second before the
 * oldest code whose user must still sign in was issued — unexpired, and unspent, or spent but not yet revoked and
 * so lately that its answer may still be on its way (it is revoked ENROL_REVOKE_DELAY_MS after the answer, not
 * before; one spent longer ago whose revocation was lost with its controller is cut by the floor instead) — and
 * never nearer now than ENROL_REVOKE_ALL_MARGIN_S (a code minted on another console, not yet read here).
 */
export function enrolFloor(
  codes: CodeRecord[],
  now = Date.now(),
): (revoked: Record<string, number>) => number {
  return (revoked) => {
    let floor = Math.floor(now / 1000) - ENROL_REVOKE_ALL_MARGIN_S;
    for (const c of codes) {
      if (c.account !== "ENROL" || Date.parse(c.expires_at) <= now) continue;
      const iat = issuedAtOf(c);
      const answering =
        c.spent && !cutOff(revoked, c.user, iat) && now - Date.parse(c.spent.at) < ENROL_SPENT_HOLD_MS;
      if (!c.spent || answering) floor = Math.min(floor, iat - 1);
    }
    return floor;
  };
}

/**
 * What revoking a node's record cuts off: its own user, and its enrolling user while the code is unspent (the code
 * says its account; a record whose code is not there names a user of NODES, from before ENROL).
 */
export function revokesOf(
  record: NodeRecord,
  code: CodeRecord | null,
  at = Math.floor(Date.now() / 1000),
): Revoke[] {
  const out: Revoke[] = [];
  const user = record.keys ? userOfIdentity(record.keys.identity) : null;
  if (user) out.push({ user, at, enrolling: false, account: nodesAccountOf(record) });
  if (record.enrol)
    out.push(codeRevoke(code?.user === record.enrol.user ? code : { ...record.enrol, added_at: "" }));
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
  mesh.accountKeys();
  return await withState(mesh, async (state) => {
    // minted once the bus answers: its issued-at is as close as can be to its record's arrival in the bucket,
    // which is what keeps it above ENROL's revocation of every older user (ENROL_REVOKE_ALL_MARGIN_S)
    const code = newCode(mesh, name, expiresS);
    const record = { ...newRecord(name, new Date(), enrolOf(code.record)), labels };
    await state.nodes.create(name, record).catch((e) => {
      if (e instanceof Conflict) throw new MeshRefused(`node ${name} is already in this mesh`);
      throw e;
    });
    try {
      await state.codes.put(name, code.record);
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
    await whileChanged(name, "removed", async () => {
      const { value, revision } = await knownNode(state, name);
      const revokes = revokesOf(value, (await state.codes.get(name))?.value ?? null);
      if (revokes.length) await revokeOnBus(mesh, revokes);
      await state.nodes.remove(name, revision);
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
    // each try with a new code, and whatever the record then names revoked: revoking a user twice is harmless
    const { code, enrolled } = await whileChanged(name, "reissued", async () => {
      const { value, revision } = await knownNode(state, name);
      if (value.moved_to)
        throw new MeshRefused(`node ${name} has moved to the mesh at ${value.moved_to}: reissue it there`);
      const code = newCode(mesh, name, expiresS);
      const revokes = revokesOf(value, (await state.codes.get(name))?.value ?? null);
      if (revokes.length) await revokeOnBus(mesh, revokes);
      await state.nodes.update(name, { ...value, enrol: enrolOf(code.record) }, revision);
      return { code, enrolled: value.keys !== null };
    });
    await state.codes.put(name, code.record);
    return { code: codeOf(mesh, name, code.credential), enrolled };
  });
}

/**
 * `attempt` (the node's record read, the bus told, the record written by compare-and-set) done again when the
 * record changed between its read and its write: a controller writing an enrolment's answer, or a push raising the
 * serial, is no reason to send an operator back. Told to try again only when it kept changing, KV_CAS_TRIES times.
 */
async function whileChanged<R>(name: string, verb: string, attempt: () => Promise<R>): Promise<R> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (e) {
      if (!(e instanceof Conflict)) throw e;
      if (i >= KV_CAS_TRIES) throw new MeshRefused(`node ${name} changed while it was ${verb}: try again`);
    }
  }
}
