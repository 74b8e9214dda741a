// The node accounts' shards (protocol.md "Shards"): a node's user is issued in one of NODE_SHARDS accounts, by its
// name, so that a revocation (its account's claims pushed again, applied by nats-server with a walk of every client
// of the account) walks a shard's nodes, never the fleet's. NODES holds the nodes enrolled before the shards.
import { createHash, hkdfSync } from "node:crypto";
import { NODE_SHARDS } from "../defaults.ts";
import { type KeyPair, keyPairFromRaw, nkeyOf } from "../vocabulary/index.ts";
import type { Reads } from "./permissions.ts";

/** The account a node's user is in: its shard, or NODES for a node enrolled before the shards. */
export type NodesAccount = "NODES" | `NODES.${string}`;

export function shardName(i: number): NodesAccount {
  return `NODES.${i.toString(16).padStart(2, "0")}`;
}

/** Every shard, NODES.00 … NODES.7f. */
export const SHARDS: readonly NodesAccount[] = Array.from({ length: NODE_SHARDS }, (_, i) => shardName(i));

/** A node's shard: the first byte of SHA-256 of its name, modulo NODE_SHARDS (its record keeps it). */
export function shardOf(node: string): NodesAccount {
  return shardName(createHash("sha256").update(node).digest()[0]! % NODE_SHARDS);
}

/** The account a node's user is issued in: its shard when it reads directly, NODES when it holds a consumer. */
export function nodesAccountFor(node: string, reads: Reads): NodesAccount {
  return reads === "direct" ? shardOf(node) : "NODES";
}

/** The subject MESH asks `node` for a plan on: its account's export, under the shard's own prefix in MESH. */
export function planSubjectIn(account: NodesAccount, node: string): string {
  return account === "NODES" ? `mesh.plan.${node}` : `mesh.plan.${account.slice("NODES.".length)}.${node}`;
}

/** NODES' pair, from which every shard's is derived (accounts.ts AccountKeys has it). */
type NodesKey = { nodes: KeyPair };

const shardPairs = new WeakMap<NodesKey, Map<string, KeyPair>>();

/**
 * A node account's pair: NODES' own, or a shard's, derived from NODES' seed (HKDF-SHA256, its name as the info), so
 * accounts.json holds no more keys and every copy of the mesh directory derives the same.
 */
export function nodesAccountPair(keys: NodesKey, account: NodesAccount): KeyPair {
  if (account === "NODES") return keys.nodes;
  const pairs = shardPairs.get(keys) ?? new Map<string, KeyPair>();
  shardPairs.set(keys, pairs);
  let pair = pairs.get(account);
  if (!pair) {
    const raw = Buffer.from(keys.nodes.privateKey.export({ format: "jwk" }).d ?? "", "base64url");
    pair = keyPairFromRaw("ed25519", Buffer.from(hkdfSync("sha256", raw, "mesh-host shard", account, 32)));
    pairs.set(account, pair);
  }
  return pair;
}

export function nodesAccountId(keys: NodesKey, account: NodesAccount): string {
  return nkeyOf("account", nodesAccountPair(keys, account).publicKey);
}
