// The shard accounts of node users (src/mesh/shards.ts): a node's shard is a function of its name alone, and each
// shard's key derives from NODES' seed, so every copy of the mesh directory (the same accounts.json) derives the
// same keys, each shard its own, none of them NODES'.
import { describe, expect, it } from "vitest";
import { NODE_SHARDS } from "../../src/defaults.ts";
import { keysOfSeeds, seedsOf } from "../../src/mesh/accounts.ts";
import { accountId, makeAccountKeys } from "../../src/mesh/index.ts";
import { shardId, shardOf, shardPlanSubject } from "../../src/mesh/shards.ts";

describe("shards", () => {
  it("a node's shard is its name's, in range, and the fleet spreads over all of them", () => {
    const names = Array.from({ length: 20 * NODE_SHARDS }, (_, i) => `n${i}`);
    for (const n of names.slice(0, 50)) expect(shardOf(n)).toBe(shardOf(n));
    const used = new Set(names.map(shardOf));
    expect([...used].every((s) => Number.isInteger(s) && s >= 0 && s < NODE_SHARDS)).toBe(true);
    expect(used.size).toBe(NODE_SHARDS);
  });

  it("every copy of the seeds derives the same shard keys; each shard its own, none NODES'", () => {
    const keys = makeAccountKeys();
    const copy = keysOfSeeds(JSON.parse(JSON.stringify(seedsOf(keys))))!;
    const ids = Array.from({ length: NODE_SHARDS }, (_, i) => shardId(keys.nodes.privateKey, i));
    expect(Array.from({ length: NODE_SHARDS }, (_, i) => shardId(copy.nodes.privateKey, i))).toEqual(ids);
    expect(new Set(ids).size).toBe(NODE_SHARDS);
    expect(ids).not.toContain(accountId(keys, "nodes"));
    expect(ids.every((id) => /^A[A-Z2-7]{55}$/.test(id))).toBe(true);
    // another mesh's NODES derives other shards
    expect(shardId(makeAccountKeys().nodes.privateKey, 0)).not.toBe(ids[0]);
    expect(() => shardId(keys.nodes.privateKey, NODE_SHARDS)).toThrow(/no node shard/);
  });

  it("MESH asks a shard's node on a subject of its own, which NODES' `mesh.plan.*` never matches", () => {
    expect(shardPlanSubject(10, "web-1")).toBe("mesh.plan.0a.web-1");
    expect(shardPlanSubject(10)).toBe("mesh.plan.0a.*");
  });
});
