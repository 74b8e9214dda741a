// Node users spread over shard accounts (issue 29): through the built executable against a real nats-server, two
// nodes whose names fall in different shards enrol into their own shard, link, take a push, report, and answer a
// plan asked on their shard's subject; `node rm` of one cuts its live connection at once and pushes its shard's
// claims alone (NODES' and the other shard's, read back over SYS, are unchanged); and whoever holds one node's
// state directory reaches nothing of the other's, in its other account, nor MESH's JetStream API by a reply.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  accountId,
  MeshDir,
  type NodesAccount,
  nodesAccountId,
  serviceAuthenticator,
  shardOf,
  shardPlanSubject,
  userOfIdentity,
} from "../../src/mesh/index.ts";
import { shardPair } from "../../src/mesh/shards.ts";
import { State } from "../../src/store/index.ts";
import { seedOf } from "../../src/vocabulary/index.ts";
import { heldRevocations } from "../mesh/enrolling.ts";
import { appConf, asController, type LinkedNode, TestMesh } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS } from "../mesh/index.ts";
import { mesh } from "../mesh/operator.ts";
import { asNodeOf, nodeRecord } from "../mesh/state.ts";
import { ensureSea } from "../support/sea.ts";

// two names in different shards (shards.ts: SHA-256 of the name)
const A = "web-1";
const B = "web-2";
const WAIT = ["--wait-s", "120"];

let m: TestMesh;
let a: LinkedNode;
let b: LinkedNode;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  expect(shardOf(A)).not.toBe(shardOf(B));
  m = await TestMesh.start("shards-");
  a = await m.node(A);
  b = await m.node(B);
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

/** The issuer of the user JWT a node's membership carries: the account it signs in to. */
function issuerOf(state: string): string {
  const membership = new State(state).readMembership();
  if (!membership || !("jwt" in membership)) throw new Error("no v2 membership");
  return JSON.parse(Buffer.from(membership.jwt.split(".")[1]!, "base64url").toString()).iss;
}

/** An account's claims as the servers hold them, read over SYS (the JWT as they answer it; "" when none). */
async function claimsOverSys(account: NodesAccount): Promise<string> {
  const dir = new MeshDir(m.dir);
  const keys = dir.accountKeys();
  const sys = await connect({
    servers: dir.urls(),
    authenticator: serviceAuthenticator(keys, "system", "shards-test"),
    tls: { ca: dir.certPem() },
    reconnect: false,
  });
  try {
    const id = nodesAccountId(keys, account);
    const answer = await sys.request(`$SYS.REQ.ACCOUNT.${id}.CLAIMS.LOOKUP`, "", { timeout: EVENT_WAIT_MS });
    return answer.string();
  } finally {
    await sys.close();
  }
}

async function reportCount(): Promise<number> {
  const nc = await asController(m.dir);
  try {
    return (await (await jetstreamManager(nc)).streams.info("REPORTS")).state.messages;
  } finally {
    await nc.close();
  }
}

describe("two nodes in two shards", () => {
  it("each enrols into its own shard, links, takes a push and reports", async () => {
    const keys = new MeshDir(m.dir).accountKeys();
    for (const n of [a, b]) {
      expect((await nodeRecord(m.dir, n.name)).shard).toBe(shardOf(n.name));
      expect(issuerOf(n.state)).toBe(nodesAccountId(keys, shardOf(n.name)));
      expect(issuerOf(n.state)).not.toBe(accountId(keys, "nodes"));
    }
    const r = await mesh(m.dir, ["push", A, B, m.file("site.json", appConf("sharded\n")), ...WAIT]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^${A}: serial 1`, "m"));
    expect(r.stdout).toMatch(new RegExp(`^${B}: serial 1`, "m"));
    for (const n of [a, b]) expect(readFileSync(join(n.root, "etc/app.conf"), "utf8")).toBe("sharded\n");
  });

  it("a plan is asked on each node's shard subject and answered by the node", async () => {
    const r = await mesh(m.dir, ["plan", A, B, m.file("next.json", appConf("next\n")), "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.nodes.map((n: { node: string; outcome: string }) => [n.node, n.outcome])).toEqual([
      [A, "planned"],
      [B, "planned"],
    ]);
    expect(doc.summary.would_change.sort()).toEqual([A, B].sort());
  });
});

describe("as whoever holds A's state directory (the threat model)", () => {
  let nc: NatsConnection;
  beforeAll(async () => {
    nc = await asNodeOf(a.state, A);
  });
  afterAll(async () => {
    await nc?.close().catch(() => undefined);
  });

  it("cannot subscribe on B's subjects, in B's shard or as MESH asks it", async () => {
    for (const subject of [`mesh.plan.${B}`, shardPlanSubject(shardOf(B), B), `_INBOX.node.${B}.x`]) {
      const own = await asNodeOf(a.state, A);
      const sub = own.subscribe(subject);
      await expect(sub.closed, subject).resolves.toMatchObject({
        message: expect.stringContaining("Permissions Violation for Subscription"),
      });
      await own.close().catch(() => undefined);
    }
  });

  it("cannot publish on B's subjects, nor reach MESH's JetStream API by a reply", async () => {
    const reports = await reportCount();
    const own = await asNodeOf(a.state, A);
    for (const subject of [`mesh.report.${B}`, `mesh.heartbeat.${B}`, `mesh.rekey.${B}`])
      own.publish(subject, "{}");
    for (const reply of ["$JS.API.STREAM.PURGE.REPORTS", "$JS.API.STREAM.DELETE.DECLARE", `mesh.report.${B}`])
      own.publish(
        `$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${A}`,
        JSON.stringify({ batch: 1, no_wait: true }),
        {
          reply,
        },
      );
    await own.flush().catch(() => undefined);
    // the server's answers cross accounts asynchronously: a bound for them to land, not a pace
    await new Promise((r) => setTimeout(r, 1_000));
    await own.close().catch(() => undefined);
    expect(await reportCount()).toBe(reports);
    const ctl = await asController(m.dir);
    try {
      const jsm = await jetstreamManager(ctl);
      expect((await jsm.streams.info("DECLARE")).config.name).toBe("DECLARE");
      expect((await jsm.consumers.info("DECLARE", `node-${B}`)).name).toBe(`node-${B}`);
    } finally {
      await ctl.close();
    }
  });
});

describe("node rm of A", () => {
  it("cuts A's live connection at once, leaves B's, and pushes A's shard's claims alone", async () => {
    const user = userOfIdentity((await nodeRecord(m.dir, A)).keys!.identity)!;
    const before = { nodes: await claimsOverSys("nodes"), other: await claimsOverSys(shardOf(B)) };
    const aConn = await asNodeOf(a.state, A);
    const bConn = await asNodeOf(b.state, B);
    const cut = aConn.closed();
    const started = Date.now();
    const r = await mesh(m.dir, ["node", "rm", A]);
    expect(r.code, r.stderr).toBe(0);
    await cut;
    expect(Date.now() - started).toBeLessThan(EVENT_WAIT_MS);
    await expect(asNodeOf(a.state, A)).rejects.toThrow(/authentication|authorization/i);
    // B's connection is untouched: still open, and the server still answers it
    expect(bConn.isClosed()).toBe(false);
    await bConn.flush();
    await bConn.close();
    expect(Object.keys(heldRevocations(m.dir, shardOf(A)))).toEqual([user]);
    expect(await claimsOverSys("nodes")).toBe(before.nodes);
    expect(await claimsOverSys(shardOf(B))).toBe(before.other);
    // no configuration rewritten for it
    const conf = readFileSync(join(m.dir, "servers/1/server.conf"), "utf8");
    expect(conf).not.toContain(A);
    // a shard's key is derived, never written or said: not in the configuration, the server's log, or the output
    const log = readFileSync(join(m.dir, "servers/1/server.log"), "utf8");
    const nodesKey = new MeshDir(m.dir).accountKeys().nodes.privateKey;
    for (const shard of [shardOf(A), shardOf(B)]) {
      const seed = seedOf("account", shardPair(nodesKey, shard).privateKey);
      for (const text of [conf, log, r.stdout + r.stderr]) expect(text).not.toContain(seed);
    }
    // and B still takes a push
    const push = await mesh(m.dir, ["push", B, m.file("after.json", appConf("after\n")), ...WAIT]);
    expect(push.code, push.stderr).toBe(0);
    expect(readFileSync(join(b.root, "etc/app.conf"), "utf8")).toBe("after\n");
  });
});
