// The link of a node enrolled with direct reads (protocol.md "Direct reads") against a real nats-server with exactly
// the node's direct grants: it reads the last declaration on its own subject when woken, at each dial and after a
// settlement, yields only what is newer than what it settled, makes nothing on the bus — and, held by an attacker,
// reads no other node's declaration.
import { generateKeyPairSync } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Link, type LinkOptions, openBound, openLink } from "../../src/link/index.ts";
import { rawPublicOf, type StreamMark, verifyEnvelope } from "../../src/vocabulary/index.ts";
import { Hearing } from "../mesh/hearing.ts";
import { EVENT_WAIT_MS, MeshDouble } from "../mesh/index.ts";

const declaration = (node: string, n: number) => ({
  v: 1,
  node,
  mode: "converged",
  resources: [{ id: "motd", type: "file", path: "/etc/motd", content: `declaration ${n}\n` }],
});

// a bind stopped dead is given up past this, well before the client's own pings (20 s each) would end it
const STUCK_MS = 15_000;

// where nothing must come: long enough for a read the link would make at once, short of a look
const QUIET_MS = 3_000;

describe("the link, reading directly", () => {
  let mesh: MeshDouble;
  const links: Link[] = [];

  async function bound(node: string, opts: LinkOptions = {}): Promise<Link> {
    const identity = mesh.identities.get(node)?.privateKey ?? generateKeyPairSync("ed25519").privateKey;
    const membership = await mesh.admit(node, {
      identity: rawPublicOf(identity).toString("base64"),
      reads: "direct",
    });
    expect(membership.consumer).toBeUndefined();
    const opened = await openLink(membership, node, identity, opts);
    if (!opened.ok) throw new Error(opened.reason);
    links.push(opened.link);
    const b = await opened.link.bind();
    if (!b.ok) throw new Error(b.reason);
    return opened.link;
  }

  async function consumersOfDeclare(): Promise<string[]> {
    const names: string[] = [];
    for await (const c of mesh.jsm.consumers.list("DECLARE")) names.push(c.name);
    return names;
  }

  beforeAll(async () => {
    mesh = await MeshDouble.start();
  });

  afterAll(async () => {
    for (const link of links) await link.close();
    await mesh?.stop();
  });

  it("reads the declaration a push woke it for, under exactly its direct grants, and makes no consumer", async () => {
    const settled: StreamMark[] = [];
    const link = await bound("d-1", { onSettled: (m) => settled.push(m) });
    const hearing = new Hearing(link);
    expect(await hearing.next(QUIET_MS)).toBe("nothing");
    const seq = await mesh.declare("d-1", declaration("d-1", 1));
    const d = await hearing.delivered();
    expect(d.seq).toBe(seq);
    expect(verifyEnvelope(d.data, { meshKey: mesh.meshKey.publicB64, node: "d-1" }).ok).toBe(true);
    expect(await d.ack()).toEqual({ ok: true });
    expect(settled.map((m) => m.seq)).toEqual([seq]);
    // the next push wakes it again; nothing between
    expect(await hearing.next(QUIET_MS)).toBe("nothing");
    const second = await mesh.declare("d-1", declaration("d-1", 2));
    expect((await hearing.delivered()).seq).toBe(second);
    expect(await consumersOfDeclare()).not.toContain("node-d-1");
    expect(mesh.server.users.find((u) => u.user === "node.d-1")?.permissions).toEqual(
      JSON.parse(
        JSON.stringify({
          publish: {
            allow: [
              "mesh.report.d-1",
              "mesh.heartbeat.d-1",
              "mesh.rekey.d-1",
              "$JS.API.DIRECT.GET.DECLARE.mesh.declare.d-1",
              "$JS.API.DIRECT.GET.OBJ_mesh-releases",
            ],
          },
          subscribe: { allow: ["_INBOX.node.d-1.>", "mesh.plan.d-1", "mesh.declare.d-1"] },
          allow_responses: true,
        }),
      ),
    );
  });

  it("reads at the dial what was pushed while it was away: the newest of several, once", async () => {
    await mesh.admit("d-2", { reads: "direct" });
    await mesh.declare("d-2", declaration("d-2", 1));
    await mesh.declare("d-2", declaration("d-2", 2));
    const last = await mesh.declare("d-2", declaration("d-2", 3));
    const link = await bound("d-2");
    const hearing = new Hearing(link);
    const d = await hearing.delivered();
    expect(d.seq).toBe(last);
    await d.ack();
    expect(await hearing.next(QUIET_MS)).toBe("nothing");
  });

  it("does not yield again at the next dial what it settled, and yields again what it had not", async () => {
    const marks: StreamMark[] = [];
    const first = await bound("d-3", { onSettled: (m) => marks.push(m) });
    const seq = await mesh.declare("d-3", declaration("d-3", 1));
    const d = await new Hearing(first).delivered();
    await d.ack();
    await first.close();
    // dialled again with the mark it kept: nothing new
    const again = await bound("d-3", { settled: marks[0] });
    expect(await new Hearing(again).next(QUIET_MS)).toBe("nothing");
    await again.close();
    // a node killed before it settled (no mark kept): the same declaration again, as a consumer redelivers
    const killed = await bound("d-3", { settled: null });
    expect((await new Hearing(killed).delivered()).seq).toBe(seq);
  });

  it("takes a declaration of a stream made anew: a lower sequence at a later time is newer", async () => {
    const link = await bound("d-4", { settled: { seq: 1_000_000, time: "2001-01-01T00:00:00.5Z" } });
    const seq = await mesh.declare("d-4", declaration("d-4", 1));
    expect((await new Hearing(link).delivered()).seq).toBe(seq);
  });

  it("finds a push whose wake-up was lost by its look (lookMs)", async () => {
    const link = await bound("d-5", { lookMs: 2_000 });
    const hearing = new Hearing(link);
    expect(await hearing.next(500)).toBe("nothing");
    // the wake-up's subscription cut from the client's side: the server sends this link no more wake-ups, as a
    // route cut between servers loses one
    const nc = (link as unknown as { nc: NatsConnection }).nc;
    type Subs = { protocol: { subscriptions: { all(): { getSubject(): string; unsubscribe(): void }[] } } };
    const wake = (nc as unknown as Subs).protocol.subscriptions
      .all()
      .find((sub) => sub.getSubject() === "mesh.declare.d-5");
    expect(wake).toBeDefined();
    wake?.unsubscribe();
    await nc.flush();
    const seq = await mesh.declare("d-5", declaration("d-5", 1));
    expect((await hearing.delivered()).seq).toBe(seq);
  });

  it("is woken only once the stream holds the declaration: the publish's own copy reaches it not, its wake-up does, and a read then finds it", async () => {
    await mesh.admit("d-w", { reads: "direct" });
    const dialled = await mesh.dialAs("d-w");
    if (!dialled.ok) throw new Error(dialled.reason);
    const nc = dialled.nc;
    try {
      const woken = nc.subscribe("mesh.declare.d-w");
      await nc.flush();
      // stored with no wake-up, as a console older than this release pushes: its core copy is MESH's alone
      const unwoken = mesh.sign("d-w", declaration("d-w", 0));
      await mesh.js.publish("mesh.declare.d-w", JSON.stringify(unwoken));
      const wakes = woken[Symbol.asyncIterator]();
      for (let n = 1; n <= 20; n++) {
        const seq = await mesh.declare("d-w", declaration("d-w", n));
        // one connection's messages arrive in order: the core copy, had it come, would be the first
        const wake = await wakes.next();
        if (wake.done) throw new Error("the wake-ups' subscription ended");
        const read = await nc.request("$JS.API.DIRECT.GET.DECLARE.mesh.declare.d-w", "", {
          timeout: EVENT_WAIT_MS,
        });
        expect(read.headers?.get("Nats-Sequence")).toBe(String(seq));
        expect(Buffer.from(read.data).equals(Buffer.from(wake.value.data))).toBe(true);
      }
    } finally {
      await nc.close();
    }
  });

  it("a user issued for a consumer, with a membership naming none: the link closes saying the server refused it", async () => {
    const identity = generateKeyPairSync("ed25519").privateKey;
    const b64 = rawPublicOf(identity).toString("base64");
    const { consumer: _dropped, ...direct } = await mesh.admit("d-6", { identity: b64, reads: "consumer" });
    const opened = await openLink(direct, "d-6", identity);
    if (!opened.ok) throw new Error(opened.reason);
    links.push(opened.link);
    expect(await opened.link.bind()).toEqual({ ok: true });
    const ended = await new Hearing(opened.link).next();
    expect(ended !== "nothing" && ended.done).toBe(true);
    expect(await opened.link.closed()).toMatch(
      /the server refused this node the (wake-up|read) of its declarations/,
    );
  });

  describe("held by an attacker with node d-a's state", () => {
    let nc: NatsConnection;

    beforeAll(async () => {
      await mesh.admit("d-a", { reads: "direct" });
      await mesh.admit("d-b", { reads: "direct" });
      await mesh.declare("d-b", declaration("d-b", 1));
      await mesh.declare("d-a", declaration("d-a", 1));
      const dialled = await mesh.dialAs("d-a");
      if (!dialled.ok) throw new Error(dialled.reason);
      nc = dialled.nc;
    });

    afterAll(async () => {
      await nc?.close();
    });

    it("cannot read another node's declaration by any form of direct get", async () => {
      for (const [subject, body] of [
        ["$JS.API.DIRECT.GET.DECLARE.mesh.declare.d-b", ""],
        ["$JS.API.DIRECT.GET.DECLARE", JSON.stringify({ last_by_subj: "mesh.declare.d-b" })],
        ["$JS.API.DIRECT.GET.DECLARE.mesh.declare.*", ""],
        ["$JS.API.DIRECT.GET.DECLARE.mesh.declare.>", ""],
        ["$JS.API.DIRECT.GET.REPORTS.mesh.report.d-b", ""],
        ["$JS.API.DIRECT.GET.KV_mesh-nodes.$KV.mesh-nodes.d-b", ""],
      ] as const)
        await expect(nc.request(subject, body, { timeout: 2_000 })).rejects.toThrow(
          /Permissions Violation for Publish/,
        );
    });

    it("its own subject's direct get with a body naming another's is refused by the server", async () => {
      for (const body of [
        { seq: 1 },
        { last_by_subj: "mesh.declare.d-b" },
        { seq: 1, next_by_subj: "mesh.declare.d-b" },
      ]) {
        const m = await nc.request("$JS.API.DIRECT.GET.DECLARE.mesh.declare.d-a", JSON.stringify(body), {
          timeout: EVENT_WAIT_MS,
        });
        expect(m.headers?.code).toBe(408);
        expect(m.data.length).toBe(0);
      }
    });

    it("cannot hear another node's wake-ups, nor every node's", async () => {
      for (const subject of [
        "mesh.declare.d-b",
        "mesh.declare.*",
        "mesh.declare.>",
        "mesh.wake.d-b",
        "mesh.wake.*",
      ]) {
        const sub = nc.subscribe(subject);
        await expect(sub.closed).resolves.toMatchObject({
          message: expect.stringContaining(`Permissions Violation for Subscription to "${subject}"`),
        });
      }
    });

    it("cannot publish a declaration's subject nor a wake-up's, its own nor another's: nothing forged, nothing stored", async () => {
      const before = await mesh.jsm.streams.info("DECLARE");
      for (const subject of ["mesh.declare.d-a", "mesh.declare.d-b", "mesh.wake.d-a", "mesh.wake.d-b"])
        await expect(nc.request(subject, "{}", { timeout: 2_000 })).rejects.toThrow(
          /Permissions Violation for Publish/,
        );
      const after = await mesh.jsm.streams.info("DECLARE");
      expect(after.state.last_seq).toBe(before.state.last_seq);
    });

    it("a flood of direct gets of its own declaration reads its own and no other's, and changes nothing", async () => {
      const before = await mesh.jsm.streams.info("DECLARE");
      const answers = await Promise.all(
        Array.from({ length: 200 }, () =>
          nc.request("$JS.API.DIRECT.GET.DECLARE.mesh.declare.d-a", "", { timeout: EVENT_WAIT_MS }),
        ),
      );
      expect(new Set(answers.map((m) => m.headers?.get("Nats-Subject")))).toEqual(
        new Set(["mesh.declare.d-a"]),
      );
      expect((await mesh.jsm.streams.info("DECLARE")).state).toMatchObject({
        last_seq: before.state.last_seq,
        messages: before.state.messages,
      });
    });

    it("cannot reach MESH's JetStream API, nor make a consumer", async () => {
      for (const subject of [
        "$JS.API.INFO",
        "$JS.API.STREAM.INFO.DECLARE",
        "$JS.API.CONSUMER.CREATE.DECLARE",
        "$JS.API.STREAM.MSG.GET.DECLARE",
        "$JS.API.CONSUMER.INFO.DECLARE.node-d-b",
      ])
        await expect(nc.request(subject, "{}", { timeout: 2_000 })).rejects.toThrow(
          /Permissions Violation for Publish/,
        );
    });
  });

  // A simulated fleet of 10,000 redialling a three-server cluster once found 64 dials that never returned, none
  // of the dial's or bind's own timeouts ending them. Whatever the wait, a node must dial again: the server is
  // stopped in its tracks (SIGSTOP) the moment it has answered the dial, so the bind's flush is never answered
  // and its connection stays open; the client's own pings would end it only after 40 s.
  it("gives up a link whose bind the server never answers, saying it answered the dial, and dials again once it answers", async () => {
    const node = "d-stuck";
    const identity = generateKeyPairSync("ed25519").privateKey;
    const membership = await mesh.admit(node, {
      identity: rawPublicOf(identity).toString("base64"),
      reads: "direct",
    });
    let paused = false;
    try {
      const opened = await openBound(membership, node, identity, {
        openTimeoutMs: STUCK_MS,
        onDialled: () => {
          mesh.pauseServer();
          paused = true;
        },
      });
      expect(paused).toBe(true);
      expect(opened.ok ? "linked" : `${opened.kind}: ${opened.reason}`).toMatch(
        /^unreachable: no link within 15 s: \S+ answered the dial but the bind did not finish$/,
      );
    } finally {
      if (paused) mesh.resumeServer();
    }
    const again = await openBound(membership, node, identity);
    if (!again.ok) throw new Error(again.reason);
    links.push(again.link);
  }, 120_000);
});
