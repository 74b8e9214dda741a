// The mesh's state as a test reads it: from the buckets on the bus (src/mesh/state.ts), as any operator console
// would, never from a file of the mesh directory.
import { generateKeyPairSync, sign } from "node:crypto";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { dial, membershipAuth } from "../../src/link/dial.ts";
import { type CodeRecord, MeshDir, type NodeRecord, nodeUserJwt, withState } from "../../src/mesh/index.ts";
import { loadKeys, State } from "../../src/store/index.ts";
import { nkeyOf } from "../../src/vocabulary/index.ts";

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

/**
 * A connection as node `node`'s user would make it: a user of NODES with exactly the node's grants (its JWT signed
 * by the mesh's NODES key, as the controller issues it), for a key made here rather than the node's own.
 */
export async function asNodeUser(dir: string, node: string): Promise<NatsConnection> {
  const m = new MeshDir(dir);
  const pair = generateKeyPairSync("ed25519");
  const user = nkeyOf("user", pair.publicKey);
  const jwt = nodeUserJwt(m.accountKeys(), node, user);
  return await connect({
    servers: m.urls(),
    authenticator: (nonce?: string) => ({
      jwt,
      nkey: user,
      sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
    }),
    inboxPrefix: `_INBOX.node.${node}`,
    tls: { ca: m.certPem() },
    reconnect: false,
  });
}

/** Dial as the node whose state directory this is, exactly as its own `run` would: its membership and identity key. */
export async function asNodeOf(
  state: string,
  node: string,
  inbox = `_INBOX.node.${node}`,
): Promise<NatsConnection> {
  const membership = new State(state).readMembership()!;
  const keys = loadKeys(state);
  if (!keys.ok) throw new Error(keys.reason);
  const auth = membershipAuth(membership, keys.keys.identity.privateKey);
  if ("refused" in auth) throw new Error(auth.refused);
  const dialled = await dial({
    servers: membership.servers,
    fingerprint: membership.fingerprint,
    auth,
    inboxPrefix: inbox,
  });
  if (!dialled.ok) throw new Error(dialled.reason);
  return dialled.nc;
}
