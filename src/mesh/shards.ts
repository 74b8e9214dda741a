// The shard accounts of node users (protocol.md "Accounts"): NODE_SHARDS accounts beside NODES, each a copy of its
// claims, so a node's removal (its shard's claims pushed again) makes the servers re-verify the users of that one
// shard, not of the whole fleet. A node's shard is a pure function of its name, and written in its record when it
// enrols; a record without one is NODES' (a node enrolled before shards). Each shard's key is derived from NODES'
// seed (HKDF-SHA256, one fixed info per shard): every copy of the mesh directory derives the same keys, and
// nothing new is kept in accounts.json.
import { createHash, hkdfSync, type KeyObject } from "node:crypto";
import { NODE_SHARDS } from "../defaults.ts";
import { type KeyPair, keyPairFromRaw, nkeyOf } from "../vocabulary/index.ts";

/** An account whose users are nodes: NODES itself, or shard `n` (0 ≤ n < NODE_SHARDS). */
export type NodesAccount = "nodes" | number;

/** The account a node's user is in, from its record: its shard, or NODES when the record names none. */
export function nodesAccountOf(record: { shard?: number }): NodesAccount {
  return record.shard ?? "nodes";
}

/** The subject MESH asks a node for a plan on: its shard's local subject, or NODES' own `mesh.plan.<n>`. */
export function planRequestSubject(record: { node: string; shard?: number }): string {
  return record.shard === undefined
    ? `mesh.plan.${record.node}`
    : shardPlanSubject(record.shard, record.node);
}

/** The shard a node's user is issued in: the first two bytes of SHA-256(name), modulo NODE_SHARDS. */
export function shardOf(node: string): number {
  return createHash("sha256").update(node, "utf8").digest().readUInt16BE(0) % NODE_SHARDS;
}

/** Every shard, in order. */
export function allShards(): number[] {
  return Array.from({ length: NODE_SHARDS }, (_, i) => i);
}

/** A shard's two hex digits: its account's name (`NODES.0a`) and its plan subject's token. */
export function shardLabel(shard: number): string {
  return shard.toString(16).padStart(2, "0");
}

export function shardName(shard: number): string {
  return `NODES.${shardLabel(shard)}`;
}

/** Derived once per NODES key in a process: a command that issues or revokes many derives each shard once. */
const derived = new WeakMap<KeyObject, Map<number, KeyPair>>();

/** Shard `shard`'s Ed25519 pair, derived from NODES' private key (never written, never said). */
export function shardPair(nodes: KeyObject, shard: number): KeyPair {
  if (!Number.isInteger(shard) || shard < 0 || shard >= NODE_SHARDS)
    throw new Error(`there is no node shard ${shard}`);
  const pairs = derived.get(nodes) ?? new Map<number, KeyPair>();
  derived.set(nodes, pairs);
  let pair = pairs.get(shard);
  if (!pair) {
    const d = nodes.export({ format: "jwk" }).d;
    if (!d) throw new Error("a shard's key is derived from NODES' private key");
    const raw = hkdfSync(
      "sha256",
      Buffer.from(d, "base64url"),
      Buffer.alloc(0),
      `mesh-host NODES shard ${shard}`,
      32,
    );
    pair = keyPairFromRaw("ed25519", new Uint8Array(raw));
    pairs.set(shard, pair);
  }
  return pair;
}

/** The public nkey (`A…`) of shard `shard`'s account. */
export function shardId(nodes: KeyObject, shard: number): string {
  return nkeyOf("account", shardPair(nodes, shard).publicKey);
}

/**
 * The subject MESH asks a node of shard `shard` for a plan on: MESH imports each shard's `mesh.plan.*` under its
 * own local subject (a service import's `local_subject`), mapped back to `mesh.plan.<n>` in the shard.
 */
export function shardPlanSubject(shard: number, node = "*"): string {
  return `mesh.plan.${shardLabel(shard)}.${node}`;
}
