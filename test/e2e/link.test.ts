// The link against a real nats-server configured with exactly the node's permissions (the fixture):
// enough to bind, hear, settle, report and beat — and not one act wider.
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Link, openLink } from "../../src/link/index.ts";
import {
  Heartbeat,
  keyPairFromRaw,
  type Membership,
  makeMeshKey,
  Report,
  rawPublicOf,
  signEnvelope,
  verifyEnvelope,
} from "../../src/vocabulary/index.ts";
import { Hearing } from "../mesh/hearing.ts";
import { EVENT_WAIT_MS, MeshDouble, waitForAsync } from "../mesh/index.ts";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url), "utf8");
const wire = (name: string) => JSON.stringify(JSON.parse(fixture(name)));
const dec = new TextDecoder();
/** web-1 signs with the fixture identity key, so what it says is the signed fixtures; every other node its own. */
const fixtureIdentity = JSON.parse(fixture("identity-key.json")) as { seed: string };
function identityOf(node: string): KeyObject {
  if (node === "web-1")
    return keyPairFromRaw("ed25519", Buffer.from(fixtureIdentity.seed, "base64")).privateKey;
  return generateKeyPairSync("ed25519").privateKey;
}

const declaration = (node: string, n: number) => ({
  v: 1,
  node,
  mode: "converged",
  resources: [{ id: "motd", type: "file", path: "/etc/motd", content: `declaration ${n}\n` }],
});

function reportFor(node: string, seq: number, digest: string): Report {
  return { ...Report.parse(JSON.parse(fixture("report.json"))), node, declaration: { seq, digest } };
}

describe("the link", () => {
  let mesh: MeshDouble;
  const links: Link[] = [];

  async function linked(node: string, membership?: Membership): Promise<Link> {
    // the double verifies what the node says by the key it enrolled with, and issues its user for that key: a
    // membership the test had admitted already is for the key the double made then
    const identity = (membership && mesh.identities.get(node)?.privateKey) || identityOf(node);
    const m = membership ?? (await mesh.admit(node, { identity: rawPublicOf(identity).toString("base64") }));
    const opened = await openLink(m, node, identity, { pullExpiresMs: 5_000 });
    if (!opened.ok) throw new Error(opened.reason);
    links.push(opened.link);
    return opened.link;
  }

  async function bound(node: string, membership?: Membership): Promise<Link> {
    const link = await linked(node, membership);
    const b = await link.bind();
    if (!b.ok) throw new Error(b.reason);
    return link;
  }

  beforeAll(async () => {
    mesh = await MeshDouble.start();
  });

  afterAll(async () => {
    for (const link of links) await link.close();
    await mesh?.stop();
  });

  it("binds, hears, keeps alive, acks, reports and beats under exactly the node's permissions", async () => {
    const link = await bound("web-1");
    const hearing = new Hearing(link);
    const seq = await mesh.declare("web-1", declaration("web-1", 1));
    const d = await hearing.delivered();
    expect(d.seq).toBe(seq);
    expect([d.newer, d.claimed]).toEqual([null, 0]);
    expect(d.redelivered).toBe(false);
    const verified = verifyEnvelope(d.data, { meshKey: mesh.meshKey.publicB64, node: "web-1" });
    expect(verified.ok).toBe(true);
    if (!verified.ok) return;
    d.working();
    expect(await d.ack()).toEqual({ ok: true });
    const info = await mesh.consumerInfo("web-1");
    expect([info.num_ack_pending, info.num_pending, info.ack_floor.stream_seq]).toEqual([0, 0, seq]);

    const report = reportFor("web-1", seq, verified.digest);
    const said = await link.report(report);
    expect(said).toMatchObject({ ok: true, duplicate: false });
    const got = await mesh.awaitReport(1, { node: "web-1" });
    // signed by the node's identity key: the body is the report as the node made it
    expect(JSON.parse(dec.decode(got.data))).toMatchObject({ v: 2, body: JSON.stringify(report) });
    expect(got.value).toEqual(report);
    expect(got.value?.declaration).toEqual({ seq, digest: verified.digest });

    const beat = Heartbeat.parse(JSON.parse(fixture("heartbeat.json")));
    expect(link.heartbeat(beat)).toEqual({ ok: true });
    const heard = await mesh.awaitHeartbeat(1);
    expect(heard.subject).toBe("mesh.heartbeat.web-1");
  });

  it("produces the signed report and heartbeat fixtures byte for byte", async () => {
    const link = await bound("web-1", mesh.membershipOf("web-1"));
    const before = mesh.reports.filter((r) => r.subject === "mesh.report.web-1").length;
    const beats = mesh.heartbeats.length;
    expect(await link.report(Report.parse(JSON.parse(fixture("report.json"))))).toMatchObject({ ok: true });
    expect(link.heartbeat(Heartbeat.parse(JSON.parse(fixture("heartbeat.json"))))).toEqual({ ok: true });
    expect(dec.decode((await mesh.awaitReport(before + 1, { node: "web-1" })).data)).toBe(
      wire("report.signed.json"),
    );
    expect(dec.decode((await mesh.awaitHeartbeat(beats + 1)).data)).toBe(wire("heartbeat.signed.json"));
  });

  it("the same report sent again (an outbox retry) is one message on the stream", async () => {
    const link = await bound("retry");
    const report = reportFor("retry", 1, "0".repeat(64));
    const first = await link.report(report);
    const again = await link.report(structuredClone(report));
    expect(first).toMatchObject({ ok: true, duplicate: false });
    expect(again).toMatchObject({ ok: true, duplicate: true });
    if (first.ok && again.ok) expect(again.seq).toBe(first.seq);
  });

  it("refuses a report or heartbeat for another node without sending it", async () => {
    const link = await bound("shy");
    expect(await link.report(reportFor("other", 1, "0".repeat(64)))).toEqual({
      ok: false,
      reason: "the report is for node other, not shy",
    });
    const beat = { ...Heartbeat.parse(JSON.parse(fixture("heartbeat.json"))), node: "other" };
    expect(link.heartbeat(beat)).toMatchObject({ ok: false });
  });

  describe("is not wider than protocol.md", () => {
    let nc: NatsConnection;

    beforeAll(async () => {
      await mesh.admit("narrow");
      await mesh.admit("other");
      const dialled = await mesh.dialAs("narrow");
      if (!dialled.ok) throw new Error(dialled.reason);
      nc = dialled.nc;
    });

    afterAll(async () => {
      await nc?.close();
    });

    it("creating a consumer is refused", async () => {
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      await expect(
        jsm.consumers.add("DECLARE", { durable_name: "node-narrow-2", ack_policy: AckPolicy.Explicit }),
      ).rejects.toThrow(
        /Permissions Violation for Publish to "\$JS\.API\.CONSUMER\.(DURABLE\.)?CREATE\.DECLARE/,
      );
    });

    it("publishing another node's report is refused, and nothing reaches the stream", async () => {
      const js = jetstream(nc);
      await expect(js.publish("mesh.report.other", "{}", { timeout: 2000 })).rejects.toThrow(
        'Permissions Violation for Publish to "mesh.report.other"',
      );
      const info = await mesh.jsm.streams.info("REPORTS", { subjects_filter: "mesh.report.other" });
      expect(info.state.subjects?.["mesh.report.other"] ?? 0).toBe(0);
    });

    it("subscribing outside its inbox is refused", async () => {
      for (const subject of ["mesh.declare.narrow", "_INBOX.node.other.x", "_INBOX.>"]) {
        const sub = nc.subscribe(subject);
        await expect(sub.closed).resolves.toMatchObject({
          message: expect.stringContaining(`Permissions Violation for Subscription to "${subject}"`),
        });
      }
    });

    it("JetStream API beyond its consumer's info and next is refused", async () => {
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      await expect(jsm.streams.info("DECLARE")).rejects.toThrow(/Permissions Violation/);
      await expect(jsm.consumers.info("DECLARE", "node-other")).rejects.toThrow(/Permissions Violation/);
      await expect(jsm.getAccountInfo()).rejects.toThrow(/Permissions Violation/);
      await expect(jsm.consumers.delete("DECLARE", "node-narrow")).rejects.toThrow(/Permissions Violation/);
    });
  });

  it("a missing consumer is said as the mesh's, and never created", async () => {
    const membership = await mesh.admit("orphan");
    await mesh.deleteConsumer("orphan");
    const link = await linked("orphan", membership);
    expect(await link.bind()).toEqual({
      ok: false,
      kind: "missing",
      reason: "consumer node-orphan on DECLARE does not exist: the mesh creates it at enrolment",
    });
    await expect(mesh.consumerInfo("orphan")).rejects.toThrow(/consumer not found/);
    expect(() => link.declarations()).toThrow(/bind\(\)/);
  });

  it("a consumer deleted under a waiting pull closes the link, said as the mesh's", async () => {
    const link = await bound("deleted");
    const pending = new Hearing(link).next();
    await waitForAsync(
      async () => (await mesh.consumerInfo("deleted")).num_waiting > 0,
      EVENT_WAIT_MS,
      "the pull waiting at the server",
    );
    await mesh.deleteConsumer("deleted");
    expect(await pending).toMatchObject({ done: true });
    expect(await link.closed()).toBe(
      "consumer node-deleted on DECLARE does not exist: the mesh creates it at enrolment",
    );
  });

  it("binds by stream, consumer and subject: an empty or another subject is refused", async () => {
    const membership = await mesh.admit("strict");
    const empty = await linked("strict", { ...membership, subject: "" });
    expect(await empty.bind()).toMatchObject({
      ok: false,
      kind: "refused",
      reason: expect.stringContaining("subject is empty"),
    });
    const wrong = await linked("strict", { ...membership, subject: "mesh.declare.other" });
    expect(await wrong.bind()).toMatchObject({
      ok: false,
      reason: "consumer node-strict on DECLARE delivers mesh.declare.strict, not mesh.declare.other",
    });
  });

  it("three declarations published while the node was away leave only the newest, delivered first", async () => {
    const membership = await mesh.admit("away");
    const seqs = [];
    for (const n of [1, 2, 3]) seqs.push(await mesh.declare("away", declaration("away", n)));
    expect(await mesh.declared("away")).toEqual({ messages: 1, lastSeq: seqs[2] });
    const hearing = new Hearing(await bound("away", membership));
    const d = await hearing.delivered();
    expect(d.seq).toBe(seqs[2]);
    expect([d.newer, d.claimed]).toEqual([null, 0]);
    const verified = verifyEnvelope(d.data, { meshKey: mesh.meshKey.publicB64, node: "away" });
    expect(verified.ok && verified.declaration.resources[0]).toMatchObject({ content: "declaration 3\n" });
    expect(await d.ack()).toEqual({ ok: true });
    expect(await hearing.next(300)).toBe("nothing");
  });

  it("a newer declaration arriving while one is in hand is seen as waiting, then delivered", async () => {
    const link = await bound("busy");
    const hearing = new Hearing(link);
    const first = await mesh.declare("busy", declaration("busy", 1));
    const d1 = await hearing.delivered();
    expect([d1.seq, d1.newer, await link.waiting()]).toEqual([first, null, 0]);
    const second = await mesh.declare("busy", declaration("busy", 2));
    expect(await link.waiting()).toBe(1);
    expect(await d1.ack()).toEqual({ ok: true }); // settled like an applied one: superseded
    const d2 = await hearing.delivered();
    expect([d2.seq, d2.newer]).toEqual([second, null]);
    expect(await d2.ack()).toEqual({ ok: true });
  });

  it("a forged envelope is refused by verification and terminated, never redelivered", async () => {
    const membership = await mesh.admit("forged", { ackWaitMs: 1000 });
    const hearing = new Hearing(await bound("forged", membership));
    const impostor = makeMeshKey();
    const seq = await mesh.publishEnvelope(
      "forged",
      signEnvelope(JSON.stringify(declaration("forged", 1)), impostor.privateKey),
    );
    const d = await hearing.delivered();
    expect(d.seq).toBe(seq);
    expect(verifyEnvelope(d.data, { meshKey: mesh.meshKey.publicB64, node: "forged" })).toMatchObject({
      ok: false,
      refusals: [{ field: "sig", reason: "signature does not verify against the mesh key" }],
    });
    expect(await d.term()).toEqual({ ok: true });
    expect(await hearing.next(2000)).toBe("nothing"); // twice the ack wait
    const info = await mesh.consumerInfo("forged");
    expect([info.num_ack_pending, info.num_redelivered]).toEqual([0, 0]);
  });

  it("control: a message left unsettled is redelivered after the ack wait", async () => {
    const membership = await mesh.admit("dies", { ackWaitMs: 1000 });
    const hearing = new Hearing(await bound("dies", membership));
    const seq = await mesh.declare("dies", declaration("dies", 1));
    const first = await hearing.delivered();
    expect(first.seq).toBe(seq);
    const again = await hearing.delivered();
    expect([again.seq, again.redelivered]).toEqual([seq, true]);
    expect(await again.ack()).toEqual({ ok: true });
  });

  it("in-progress acks keep a long apply's message from being redelivered", async () => {
    // an ack wait eight times the beat: a busy machine may be late with a beat by seconds and still hold it
    const membership = await mesh.admit("slow", { ackWaitMs: 4000 });
    const hearing = new Hearing(await bound("slow", membership));
    const seq = await mesh.declare("slow", declaration("slow", 1));
    const d = await hearing.delivered();
    for (let i = 0; i < 16; i++) {
      await new Promise((r) => setTimeout(r, 500)); // 8 s of "applying", twice the ack wait
      d.working();
    }
    expect(await d.ack()).toEqual({ ok: true });
    const info = await mesh.consumerInfo("slow");
    expect([info.num_redelivered, info.ack_floor.stream_seq]).toEqual([0, seq]);
    expect(await hearing.next(300)).toBe("nothing");
  });

  it("ends its declarations and says why when the server goes away; the consumer outlives it", async () => {
    const membership = await mesh.admit("restart");
    const link = await bound("restart", membership);
    const hearing = new Hearing(link);
    const pending = hearing.next();
    await mesh.restartServer();
    expect(await pending).toMatchObject({ done: true });
    expect(await link.closed()).toMatch(/^the connection to nats:\/\/127\.0\.0\.1:\d+ closed/);
    const again = await bound("restart", membership);
    const seq = await mesh.declare("restart", declaration("restart", 9));
    const d = await new Hearing(again).delivered();
    expect(d.seq).toBe(seq);
    expect(await d.ack()).toEqual({ ok: true });
    await again.close();
    expect(await again.closed()).toBe("closed by the host");
  });
});
