// The node accounts' shards (protocol.md "Shards") against a real nats-server started from `mesh init`'s
// configuration. nats-server 2.9 builds an account on its first use; MESH imports a plan service from each of the
// 128 shards, and a build of MESH raced by another lookup of it left a shard bound to a discarded copy (its node
// linked, and was never heard). SYS imports MESH's `mesh.load`, and the server builds SYS's imports at its start:
// the first test fails without that import. Then a node enrolled through the built executable is its shard's: a plan
// reaches it through MESH's import of that shard, and `node rm` cuts it with its shard's claims alone.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  accountId,
  connectBus,
  MeshDir,
  nodesAccountId,
  revocationsOnBus,
  SHARDS,
  shardOf,
} from "../../src/mesh/index.ts";
import { startServer } from "../../src/mesh/servers.ts";
import { addNode, appConf, enrolAt, keptRuns, runLinkUp } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS } from "../mesh/index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { nodeRecord } from "../mesh/state.ts";
import { tempDir } from "../support/tmp.ts";

const kept = keptRuns();

describe("a server of the mesh, started", () => {
  it("holds MESH, NODES and every shard from its start, before any user of them signs in", async () => {
    const dir = join(tempDir("shards-start-"), "mesh");
    await initMesh(dir, await freePortPairs(1));
    const md = new MeshDir(dir);
    const server = await startServer(md, 1);
    try {
      // a user of SYS alone: nothing of MESH's, NODES' or a shard's has signed in
      const sys = await connectBus(md, { system: true, name: "test (system)" });
      try {
        const m = await sys.nc.request("$SYS.REQ.SERVER.PING.ACCOUNTZ", "{}", { timeout: EVENT_WAIT_MS });
        const held = (JSON.parse(m.string()) as { data: { accounts: string[] } }).data.accounts;
        const keys = md.accountKeys();
        const wanted = [
          accountId(keys, "mesh"),
          accountId(keys, "nodes"),
          ...SHARDS.map((s) => nodesAccountId(keys, s)),
        ];
        expect(wanted.filter((id) => !held.includes(id))).toEqual([]);
      } finally {
        await sys.close();
      }
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });
});

describe("a node enrolled now", () => {
  it("is its shard's: asked for a plan through MESH's import of that shard, and node rm revokes it there at once", async () => {
    const base = tempDir("shards-node-");
    const dir = join(base, "mesh");
    await initMesh(dir, await freePortPairs(1));
    const up = kept.keep(await meshUp(dir));
    const node = await enrolAt(await addNode(dir, "web-1"), join(base, "web-1"));
    const run = kept.keep(await runLinkUp(kept, node));
    expect((await nodeRecord(dir, "web-1")).account).toBe(shardOf("web-1"));

    const file = join(base, "app.json");
    writeFileSync(file, JSON.stringify(appConf("shard\n")));
    const planned = await mesh(dir, ["plan", "web-1", file, "--json"]);
    expect(planned.code, planned.stderr).toBe(0);
    expect(JSON.parse(planned.stdout).nodes[0]).toMatchObject({ node: "web-1" });
    expect(planned.stdout).not.toMatch(/not connected|no answer/);

    const removed = await mesh(dir, ["node", "rm", "web-1"]);
    expect(removed.code, removed.stderr).toBe(0);
    await awaitOutput(
      run,
      (o) => /removed from its mesh|revoked|Authorization/i.test(o.stderr),
      "the node cut",
    );
    const shard = await revocationsOnBus(new MeshDir(dir), shardOf("web-1"));
    expect(Object.keys(shard.users)).toHaveLength(1);
    // NODES, every other node's account, keeps none: no walk of anyone else's clients
    expect((await revocationsOnBus(new MeshDir(dir), "NODES")).users).toEqual({});
    expect(up.output().stderr).not.toMatch(/refused the .* claims/);
  });
});
