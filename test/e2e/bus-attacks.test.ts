// Issue 28's attacks by reply address, tried as whoever holds node A's state directory: A enrolled through the built
// executable against a real nats-server running the mesh's own accounts (src/mesh: operator, SYS, MESH, NODES), A's
// membership and identity key read from A's store, and every trick played with them. Each failed on the one-account
// bus; each must fail now, and what was held must stay held.

import { generateKeyPairSync, sign } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPORTS_PER_NODE } from "../../src/defaults.ts";
import { dial } from "../../src/link/dial.ts";
import { nodesAccountPair, shardOf } from "../../src/mesh/index.ts";
import { issueJwt } from "../../src/mesh/jwt.ts";
import { loadKeys, makeKeys, publicKeys, State } from "../../src/store/index.ts";
import { nkeyOf } from "../../src/vocabulary/index.ts";
import { enrolAt } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, MeshDouble, waitFor } from "../mesh/index.ts";
import { asNodeOf } from "../mesh/state.ts";
import { ensureSea } from "../support/sea.ts";

let mesh: MeshDouble;
const bases: string[] = [];
beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  mesh = await MeshDouble.start();
}, 600_000);
afterAll(async () => {
  await mesh?.stop();
  for (const b of bases) rmSync(b, { recursive: true, force: true });
});

/** Enrol `node` through the executable; its state directory: all an attacker holding it has. */
async function enrolled(node: string): Promise<string> {
  // kept for the whole file (tempDir's go after each test): a describe's nodes outlive its first test
  const base = mkdtempSync(join(tmpdir(), "bus-attacks-"));
  bases.push(base);
  return (await enrolAt((await mesh.enrolmentCode(node)).code, base)).state;
}

const asNode = asNodeOf;

async function settle(nc: NatsConnection): Promise<void> {
  await nc.flush().catch(() => undefined);
  // the server's answers to A's requests cross accounts asynchronously: a bound for them to land, not a pace
  await new Promise((r) => setTimeout(r, 1_000));
}

async function streamMessages(name: string): Promise<number> {
  return (await mesh.jsm.streams.info(name)).state.messages;
}

describe("a node's reply address never reaches the mesh's JetStream API (issue 28, 1 and 2)", () => {
  let a: string;
  let nc: NatsConnection;
  const heardInMesh: string[] = [];

  beforeAll(async () => {
    a = await enrolled("a");
    await enrolled("b");
    await mesh.declare("b", { v: 1, node: "b", mode: "converged", resources: [] });
    await mesh.declare("a", { v: 1, node: "a", mode: "converged", resources: [] });
    // B's report already in REPORTS: a purge would take it
    await mesh.js.publish("mesh.report.b", "{}");
    // what would cross into MESH on another node's subjects
    for (const s of [
      "mesh.report.b",
      "mesh.enrol.b",
      "mesh.heartbeat.b",
      "mesh.rekey.b",
      "mesh.declare.b",
      "mesh.wake.b",
    ])
      mesh.nc.subscribe(s, { callback: (_e, m) => void heardInMesh.push(m.subject) });
    await mesh.nc.flush();
    nc = await asNode(a, "a");
  }, 600_000);
  afterAll(async () => {
    await nc?.close();
  });

  it("A's pull with its reply at PURGE, DELETE of B's consumer, DELETE of DECLARE changes nothing", async () => {
    const reports = await streamMessages("REPORTS");
    const bDeclared = await mesh.declared("b");
    for (const reply of [
      "$JS.API.STREAM.PURGE.REPORTS",
      "$JS.API.CONSUMER.DELETE.DECLARE.node-b",
      "$JS.API.STREAM.DELETE.DECLARE",
      "mesh.declare.b",
      "mesh.wake.b",
      "mesh.report.b",
      "mesh.enrol.b",
    ])
      nc.publish("$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-a", JSON.stringify({ batch: 1, no_wait: true }), {
        reply,
      });
    await settle(nc);
    expect(await streamMessages("REPORTS")).toBe(reports);
    expect((await mesh.consumerInfo("b")).name).toBe("node-b");
    expect(await mesh.declared("b")).toEqual(bDeclared);
    expect(heardInMesh).toEqual([]);
  });

  it("A's report (and heartbeat, and rekey) with its reply at PURGE of DECLARE or B's subjects changes nothing", async () => {
    const bDeclared = await mesh.declared("b");
    for (const subject of ["mesh.report.a", "mesh.heartbeat.a", "mesh.rekey.a"])
      for (const reply of [
        "$JS.API.STREAM.PURGE.DECLARE",
        "mesh.declare.b",
        "mesh.wake.b",
        "mesh.report.b",
        "mesh.enrol.b",
      ])
        nc.publish(subject, "{}", { reply });
    await settle(nc);
    expect(await mesh.declared("b")).toEqual(bDeclared);
    expect(await streamMessages("DECLARE")).toBeGreaterThanOrEqual(2);
    expect(heardInMesh).toEqual([]);
  });

  it("a reply in the JetStream ack space is refused by the server itself: B's declaration cannot be acked by A", async () => {
    const b = await mesh.consumerInfo("b");
    const seq = (await mesh.declared("b")).lastSeq;
    const own = await asNode(a, "a");
    own.publish("mesh.report.a", "{}", { reply: `$JS.ACK.DECLARE.node-b.1.${seq}.1.0.0` });
    await own.flush().catch(() => undefined);
    await own.close().catch(() => undefined);
    const after = await mesh.consumerInfo("b");
    expect(after.num_pending + after.num_ack_pending).toBe(b.num_pending + b.num_ack_pending);
  });
});

describe("the enrolment question's reply is answered only at the node's own inbox (issue 28, 2)", () => {
  it("a question naming the JetStream API as its reply purges nothing and is not answered there", async () => {
    const node = "asker";
    const { code } = await mesh.enrolmentCode(node);
    const dialled = await dial({
      servers: [mesh.url],
      fingerprint: mesh.fingerprint,
      auth: mesh.enrolAuth(node, code),
      inboxPrefix: `_INBOX.enrol.${node}`,
    });
    if (!dialled.ok) throw new Error(dialled.reason);
    await mesh.js.publish("mesh.report.someone", "{}");
    const reports = await streamMessages("REPORTS");
    const question = {
      v: 1,
      node,
      reply: "$JS.API.STREAM.PURGE.REPORTS",
      keys: publicKeys(makeKeys()),
      facts: { os: "linux", arch: "x64", hostname: "h", version: "0" },
    };
    const seen = mesh.enrolments.length;
    dialled.nc.publish(`mesh.enrol.${node}`, JSON.stringify(question));
    await settle(dialled.nc);
    await waitFor(() => mesh.enrolments.length > seen, EVENT_WAIT_MS, "the question at the controller");
    expect(await streamMessages("REPORTS")).toBe(reports);
    await dialled.nc.close();
  });
});

describe("one node cannot fill the store (issue 28, 7)", () => {
  it("A's flood of reports keeps only its own newest; B's report stays; an oversized one is refused", async () => {
    const a = await enrolled("flood");
    await mesh.js.publish("mesh.report.calm", "{}");
    const nc = await asNode(a, "flood");
    for (let i = 0; i < REPORTS_PER_NODE + 50; i++) nc.publish("mesh.report.flood", JSON.stringify({ i }));
    await settle(nc);
    expect(await mesh.reportCount("flood")).toBeLessThanOrEqual(REPORTS_PER_NODE);
    expect(await mesh.reportCount("calm")).toBe(1);
    const before = await mesh.reportCount("flood");
    nc.publish("mesh.report.flood", Buffer.alloc(512 * 1024, 1));
    await settle(nc);
    expect(await mesh.reportCount("flood")).toBe(before);
    await nc.close().catch(() => undefined);
  });
});

describe("held (issue 28's list)", () => {
  it("A's credential reaches none of B's subjects, and A's membership cannot sign in as B", async () => {
    const a = await enrolled("held-a");
    await enrolled("held-b");
    const nc = await asNode(a, "held-a");
    const sub = nc.subscribe("_INBOX.node.held-b.x");
    await expect(sub.closed).resolves.toMatchObject({
      message: expect.stringContaining("Permissions Violation for Subscription"),
    });
    await nc.close().catch(() => undefined);
    const again = await asNode(a, "held-a");
    const count = await mesh.reportCount("held-b");
    again.publish("mesh.report.held-b", "{}");
    await settle(again);
    expect(await mesh.reportCount("held-b")).toBe(count);
    await again.close().catch(() => undefined);
    // A's membership renamed to B, B's consumer named: the server still knows A's key and A's grants alone
    const membership = {
      ...new State(a).readMembership()!,
      user: "node.held-b",
      consumer: "node-held-b",
      subject: "mesh.declare.held-b",
    };
    const keys = loadKeys(a);
    if (!keys.ok) throw new Error(keys.reason);
    const { openBound } = await import("../../src/link/index.ts");
    const opened = await openBound(membership, "held-b", keys.keys.identity.privateKey);
    expect(opened.ok).toBe(false);
    if (!opened.ok) expect(opened.reason).toMatch(/permission|refused|authoriz/i);
  });

  it("node rm cuts A's live connection at once, and A cannot sign in again", async () => {
    const a = await enrolled("cut");
    const nc = await asNode(a, "cut");
    const closed = nc.closed();
    const started = Date.now();
    await mesh.revokeNode("cut");
    await closed;
    expect(Date.now() - started).toBeLessThan(EVENT_WAIT_MS);
    await expect(asNode(a, "cut")).rejects.toThrow(/authentication|authorization/i);
  });
});

/** A user the account's key signs with no subject limits: what a leak of that key (or a wrong grant) could make. */
async function unscoped(account: "nodes" | "enrol" | "shard"): Promise<NatsConnection> {
  const pair = generateKeyPairSync("ed25519");
  const user = nkeyOf("user", pair.publicKey);
  const jwt = issueJwt(
    {
      name: "unscoped",
      sub: user,
      nats: { type: "user", pub: {}, sub: {}, subs: -1, data: -1, payload: -1 },
    },
    account === "shard"
      ? nodesAccountPair(mesh.server.accounts, shardOf("scoped")).privateKey
      : mesh.server.accounts[account].privateKey,
    "account",
  );
  return await connect({
    servers: mesh.url,
    tls: { ca: mesh.cert.certPem },
    authenticator: (nonce?: string) => ({
      jwt,
      nkey: user,
      sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
    }),
  });
}

describe.each([
  ["NODES", "nodes"],
  ["a shard's (NODES.xx)", "shard"],
  ["ENROL", "enrol"],
] as const)(
  "the %s key's worst case: a user it signs with no subject limits (docs/security.md)",
  (_, account) => {
    it("reaches none of MESH's JetStream API: no stream purged or deleted, no consumer made, no bucket written", async () => {
      if (account !== "enrol") await enrolled("scoped");
      await mesh.js.publish("mesh.report.scoped", "{}");
      const nc = await unscoped(account);
      const streams = (await mesh.jsm.streams.names().next()).sort();
      const reports = await streamMessages("REPORTS");
      const consumers = (await mesh.jsm.consumers.list("DECLARE").next()).map((c) => c.name).sort();
      for (const [subject, body] of [
        ["$JS.API.STREAM.PURGE.REPORTS", ""],
        ["$JS.API.STREAM.DELETE.DECLARE", ""],
        ["$JS.API.CONSUMER.DELETE.DECLARE.node-scoped", ""],
        [
          "$JS.API.CONSUMER.CREATE.DECLARE",
          JSON.stringify({ stream_name: "DECLARE", config: { durable_name: "x" } }),
        ],
        ["$JS.API.STREAM.CREATE.MINE", JSON.stringify({ name: "MINE", subjects: ["mine.>"] })],
        ["$KV.mesh-nodes.scoped", "{}"],
        ["$JS.API.STREAM.MSG.GET.KV_mesh-nodes", JSON.stringify({ last_by_subj: "$KV.mesh-nodes.scoped" })],
      ] as const) {
        const answer = await nc.request(subject, body, { timeout: 5_000 }).then(
          (m) => m.string(),
          (e: Error) => e.message,
        );
        // whatever the server says (no responders; ENROL's own "JetStream not enabled", purging nothing), never
        // a JetStream API answer of MESH's
        const notEnabled = /"description":"JetStream not enabled for account"\}(,"purged":0)?\}$/;
        if (!notEnabled.test(answer))
          expect(answer, subject).not.toMatch(/"success":true|"purged"|"config"|"val"|"stream"/);
      }
      await nc.flush();
      await settle(nc);
      expect((await mesh.jsm.streams.names().next()).sort()).toEqual(streams);
      expect(await streamMessages("REPORTS")).toBe(reports);
      expect((await mesh.jsm.consumers.list("DECLARE").next()).map((c) => c.name).sort()).toEqual(consumers);
      await nc.close();
    });
  },
);

describe("an enrolling credential reaches the enrolment service and its answers, nothing else (the ENROL account)", () => {
  it("granted everything, it hears only enrolment answers, and what it says elsewhere reaches no stream", async () => {
    await enrolled("kept");
    const nc = await unscoped("enrol");
    const before = { reports: await streamMessages("REPORTS"), rekey: await streamMessages("REKEY") };
    for (const subject of ["mesh.report.kept", "mesh.heartbeat.kept", "mesh.rekey.kept", "mesh.plan.kept"])
      nc.publish(subject, "{}");
    await settle(nc);
    const heard: string[] = [];
    nc.subscribe(">", {
      callback: (_e, m) => {
        heard.push(m.subject);
      },
    });
    await nc.flush();
    // what MESH says to the nodes, and an enrolment answer: only the answer crosses into ENROL
    await mesh.nc.request("mesh.plan.kept", "{}", { timeout: 2_000 }).catch(() => undefined);
    mesh.nc.publish("mesh.declare.kept", "{}");
    mesh.nc.publish("_INBOX.node.kept.x", "{}");
    mesh.nc.publish("_INBOX.enrol.kept.x", "{}");
    await mesh.nc.flush();
    await settle(nc);
    expect(heard).toEqual(["_INBOX.enrol.kept.x"]);
    expect(await streamMessages("REPORTS")).toBe(before.reports);
    expect(await streamMessages("REKEY")).toBe(before.rekey);
    await nc.close();
  });
});
