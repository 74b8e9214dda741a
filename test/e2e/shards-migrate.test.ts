// `mesh migrate` from format 3 (every node user NODES', no shard accounts on the servers) to format 4, through the
// built executable against a real nats-server: refused by every other command until migrated; migrate pushes the
// shards' and MESH's claims to the server as format 3 ran it; a node enrolled into NODES before still links, is
// asked for plans on NODES' subject, and is removed by `node rm` (revoked in NODES); a node enrolling after lands in
// its shard. A directory this binary is newer than is refused in one line.
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NODE_SHARDS } from "../../src/defaults.ts";
import {
  accountId,
  accountJwt,
  MeshDir,
  nodesAccountId,
  nodeUserJwt,
  shardOf,
  userOfIdentity,
  withState,
} from "../../src/mesh/index.ts";
import { issueJwt } from "../../src/mesh/jwt.ts";
import { changeNode } from "../../src/mesh/state.ts";
import { State } from "../../src/store/index.ts";
import { heldClaims, heldRevocations } from "../mesh/enrolling.ts";
import { addNode, appConf, enrolAt, Kept, runLinkUp } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, waitFor } from "../mesh/index.ts";
import { freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { NATS_SERVER } from "../mesh/server.ts";
import { nodeRecord } from "../mesh/state.ts";
import { spawnGroup } from "../support/processes.ts";
import { ensureSea } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

const kept = new Kept();
beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);
afterAll(async () => {
  await kept.stopAll();
});

const OLD = "old-1";
const NEW = "new-1";

function setFormat(dir: string, format: number): void {
  const config = JSON.parse(readFileSync(join(dir, "mesh.json"), "utf8"));
  writeFileSync(join(dir, "mesh.json"), JSON.stringify({ ...config, format }, null, 2));
}

/**
 * A node as format 3 enrolled it: its user issued by NODES (its membership's JWT), its record naming no shard.
 * Made from one this binary enrolled, with the same identity key.
 */
async function asFormatThree(dir: string, node: string, state: string): Promise<void> {
  const m = new MeshDir(dir);
  const identity = (await nodeRecord(dir, node)).keys!.identity;
  await withState(m, (s) =>
    changeNode(s, node, (r) => {
      const { shard: _gone, ...rest } = r;
      return { value: rest, result: undefined };
    }),
  );
  const store = new State(state);
  const membership = store.readMembership()!;
  const jwt = nodeUserJwt(m.accountKeys(), node, userOfIdentity(identity)!, undefined, "nodes");
  store.writeMembership({ ...membership, jwt } as typeof membership);
}

/** MESH's claims as format 3 made them: NODES' plans imported, no shard's. */
function meshThree(dir: string): string {
  const keys = new MeshDir(dir).accountKeys();
  const claims = JSON.parse(Buffer.from(accountJwt(keys, "mesh").split(".")[1]!, "base64url").toString());
  const imports = (claims.nats.imports as { local_subject?: string }[]).filter((i) => !i.local_subject);
  return issueJwt(
    { name: claims.name, sub: claims.sub, nats: { ...claims.nats, imports } },
    keys.operator.privateKey,
    "operator",
  );
}

/** Server 1 as format 3 ran it: no shard account in its configuration or its resolver, MESH importing none. */
async function formatThreeServer(dir: string): Promise<{ stop(): Promise<void> }> {
  const keys = new MeshDir(dir).accountKeys();
  const shards = Array.from({ length: NODE_SHARDS }, (_, i) => nodesAccountId(keys, i));
  const mesh = accountId(keys, "mesh");
  for (const id of [...shards, mesh]) rmSync(join(dir, "servers/1/jwt", `${id}.jwt`), { force: true });
  const conf = join(dir, "servers/1/server.conf");
  const lines = readFileSync(conf, "utf8")
    .split("\n")
    .filter((l) => !shards.some((id) => l.includes(id)))
    .map((l) => (l.trim().startsWith(`${mesh}:`) ? `  ${mesh}: ${JSON.stringify(meshThree(dir))}` : l));
  writeFileSync(conf, lines.join("\n"));
  const log = join(dir, "servers/1/server.log");
  const from = existsSync(log) ? readFileSync(log, "utf8").length : 0;
  const child = spawnGroup(NATS_SERVER, ["-c", conf], { stdio: "ignore" });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  await waitFor(
    () => existsSync(log) && readFileSync(log, "utf8").slice(from).includes("Server is ready"),
    EVENT_WAIT_MS,
    "the format-3 server to be ready",
  );
  return {
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

describe("a directory of format 3 (every node user NODES')", () => {
  it("is migrated to 4: its old node links and is removed in NODES; a new node lands in its shard", async () => {
    const dir = join(tempDir(), "m");
    await initMesh(dir, await freePortPairs(1));
    const keys = new MeshDir(dir).accountKeys();
    let up = kept.keep(await meshUp(dir));
    const old = await enrolAt(await addNode(dir, OLD), join(tempDir(), OLD));
    await asFormatThree(dir, OLD, old.state);
    await up.stop();
    setFormat(dir, 3);
    for (const args of [["nodes"], ["up"], ["node", "add", "x-1"], ["node", "rm", OLD]]) {
      const r = await mesh(dir, args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(
        /was made before node users were spread over shard accounts \(format 3\): run `mesh-host mesh migrate` once/,
      );
    }
    const server = await formatThreeServer(dir);
    try {
      const r = await mesh(dir, ["migrate"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(
        /migrated .* from format 3 to format 4: nodes enrolling from now on are spread/,
      );
      const seeds = JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as Record<string, string>;
      for (const secret of Object.values(seeds)) expect(r.stdout + r.stderr).not.toContain(secret);
      expect(Object.keys(seeds).sort()).toEqual(["enrol", "mesh", "nodes", "operator", "system"]);
      expect(JSON.parse(readFileSync(join(dir, "mesh.json"), "utf8")).format).toBe(4);
      // the running server took every shard and MESH's imports of their plans
      expect(heldClaims(dir, shardOf(NEW))?.name).toMatch(/^NODES\.[0-9a-f]{2}$/);
      const imports = heldClaims(dir, "mesh")?.nats.imports ?? [];
      expect(imports.length).toBe(NODE_SHARDS + 1);
    } finally {
      await server.stop();
    }
    const again = await mesh(dir, ["migrate"]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is format 4 already: nothing to migrate/);

    up = kept.keep(await meshUp(dir));
    // the node of before links with its NODES user, takes a push, and answers a plan asked on NODES' subject
    await runLinkUp(kept, old);
    const push = await mesh(dir, [
      "push",
      OLD,
      writeJson(dir, "a.json", appConf("old\n")),
      "--wait-s",
      "120",
    ]);
    expect(push.code, push.stderr).toBe(0);
    expect(readFileSync(join(old.root, "etc/app.conf"), "utf8")).toBe("old\n");
    const plan = await mesh(dir, ["plan", OLD, writeJson(dir, "b.json", appConf("b\n")), "--json"]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).nodes[0].outcome).toBe("planned");
    // a node enrolling now is its shard's
    const fresh = await enrolAt(await addNode(dir, NEW), join(tempDir(), NEW));
    expect((await nodeRecord(dir, NEW)).shard).toBe(shardOf(NEW));
    const membership = new State(fresh.state).readMembership()!;
    const iss = JSON.parse(
      Buffer.from(("jwt" in membership ? membership.jwt : "").split(".")[1]!, "base64url").toString(),
    ).iss;
    expect(iss).toBe(nodesAccountId(keys, shardOf(NEW)));
    // the node of before is removed where its user is: NODES
    const user = userOfIdentity((await nodeRecord(dir, OLD)).keys!.identity)!;
    const rm = await mesh(dir, ["node", "rm", OLD]);
    expect(rm.code, rm.stderr).toBe(0);
    expect(Object.keys(heldRevocations(dir, "nodes"))).toEqual([user]);
    expect(heldRevocations(dir, shardOf(OLD))).toEqual({});
    expect(accountId(keys, "nodes")).toBe(accountId(new MeshDir(dir).accountKeys(), "nodes"));
  }, 600_000);

  it("a directory of a newer format is refused in one line, exit 2", async () => {
    const dir = join(tempDir(), "m");
    await initMesh(dir, await freePortPairs(1));
    setFormat(dir, 5);
    for (const args of [["nodes"], ["migrate"]]) {
      const r = await mesh(dir, args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(
        /was made by a newer mesh-host \(format 5; this one reads up to 4\): run that one/,
      );
    }
  });
});

function writeJson(dir: string, name: string, value: object): string {
  const path = join(dir, "..", name);
  writeFileSync(path, JSON.stringify(value));
  return path;
}
