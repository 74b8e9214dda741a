// A node that reads its declarations directly (no consumer of its own: protocol.md "Direct reads"), against a real
// nats-server holding exactly the node's permissions: woken by the core copy of each declaration, or finding it by
// its look, or at its next link; what it settled kept in its state directory, per mesh key.
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Delivered, dial, type Link, openBound } from "../../src/link/index.ts";
import { keepSettled, State, settledOf } from "../../src/store/index.ts";
import { type Membership, rawPublicOf } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS, MeshDouble } from "../mesh/index.ts";

const declaration = (node: string, n: number) => ({
  v: 1,
  node,
  mode: "converged",
  resources: [{ id: "motd", type: "file", path: "/etc/motd", content: `declaration ${n}\n` }],
});

/** The next delivery within `ms`, or "nothing"; a pending next stays pending for the next call. */
class Hearing {
  private pending: Promise<IteratorResult<Delivered>> | null = null;
  private readonly iterator: AsyncIterator<Delivered>;
  constructor(link: Link) {
    this.iterator = link.declarations()[Symbol.asyncIterator]();
  }
  async next(ms = EVENT_WAIT_MS): Promise<IteratorResult<Delivered> | "nothing"> {
    this.pending ??= this.iterator.next();
    const timer = new Promise<"nothing">((r) => setTimeout(() => r("nothing"), ms));
    const got = await Promise.race([this.pending, timer]);
    if (got !== "nothing") this.pending = null;
    return got;
  }
  async delivered(ms = EVENT_WAIT_MS): Promise<Delivered> {
    const got = await this.next(ms);
    if (got === "nothing" || got.done) throw new Error(`no delivery within ${ms} ms`);
    return got.value;
  }
}

describe("the link, reading directly", () => {
  let mesh: MeshDouble;
  let root: string;
  const links: Link[] = [];
  const identities = new Map<string, KeyObject>();
  const memberships = new Map<string, Membership>();

  /** `node`'s state directory: what it settled is kept there, per mesh key, as `mesh-host run` keeps it. */
  const stateOf = (node: string) => new State(join(root, node));

  async function linked(node: string, opts: { lookMs?: number } = {}): Promise<Link> {
    if (!identities.has(node)) identities.set(node, generateKeyPairSync("ed25519").privateKey);
    const identity = identities.get(node)!;
    if (!memberships.has(node))
      memberships.set(node, await mesh.admit(node, { identity: rawPublicOf(identity).toString("base64") }));
    const membership = memberships.get(node)!;
    const state = stateOf(node);
    const opened = await openBound(membership, node, identity, {
      ...opts,
      settled: {
        last: () => settledOf(state, membership.mesh_key),
        keep: (seq) => keepSettled(state, membership.mesh_key, seq),
      },
    });
    if (!opened.ok) throw new Error(opened.reason);
    links.push(opened.link);
    return opened.link;
  }

  /** The content the envelope's body declares (its signature is the apply's to check: test/e2e/link.test.ts). */
  const contentOf = (d: Delivered): string => {
    const envelope = JSON.parse(new TextDecoder().decode(d.data)) as { body: string };
    return (JSON.parse(envelope.body) as { resources: { content: string }[] }).resources[0]!.content;
  };

  beforeAll(async () => {
    mesh = await MeshDouble.start();
    root = mkdtempSync(join(tmpdir(), "mesh-host-direct-"));
  });

  afterAll(async () => {
    for (const link of links) await link.close();
    await mesh?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("has no consumer of its own, and is woken by a push", async () => {
    const link = await linked("woken");
    const hearing = new Hearing(link);
    // nothing declared yet: nothing delivered
    expect(await hearing.next(1_000)).toBe("nothing");
    const seq = await mesh.declare("woken", declaration("woken", 1));
    // the look is five minutes away: only the wake-up brings it this soon
    const d = await hearing.delivered();
    expect([d.seq, d.newer, d.claimed, d.redelivered]).toEqual([seq, null, 0, false]);
    expect(contentOf(d)).toBe("declaration 1\n");
    expect(await link.waiting()).toBeNull();
    await expect(mesh.consumerInfo("woken")).rejects.toThrow(/consumer not found/);
    expect(settledOf(stateOf("woken"), mesh.meshKey.publicB64)).toBe(0);
    expect(await d.ack()).toEqual({ ok: true });
    expect(settledOf(stateOf("woken"), mesh.meshKey.publicB64)).toBe(seq);
    // settled: not delivered again, and the next push is
    expect(await hearing.next(1_000)).toBe("nothing");
    const next = await mesh.declare("woken", declaration("woken", 2));
    expect((await hearing.delivered()).seq).toBe(next);
  });

  it("takes a push made while it was away at its next link, the newest of several", async () => {
    const first = await linked("away");
    const hearing = new Hearing(first);
    const seq = await mesh.declare("away", declaration("away", 1));
    expect(await (await hearing.delivered()).ack()).toEqual({ ok: true });
    await first.close();
    for (const n of [2, 3, 4]) await mesh.declare("away", declaration("away", n));
    const again = new Hearing(await linked("away"));
    const d = await again.delivered();
    expect(d.seq).toBeGreaterThan(seq);
    expect(contentOf(d)).toBe("declaration 4\n");
    expect(d.newer).toBeNull();
    await d.ack();
    expect(await again.next(1_000)).toBe("nothing");
  });

  it("does not deliver again at its next link what it settled; delivers again what it had not", async () => {
    const first = await linked("restart");
    const hearing = new Hearing(first);
    const seq = await mesh.declare("restart", declaration("restart", 1));
    await (await hearing.delivered()).ack();
    await first.close();
    // settled: a new link (a restarted process reads the same state) hears nothing
    const second = await linked("restart");
    const quiet = new Hearing(second);
    expect(await quiet.next(2_000)).toBe("nothing");
    const next = await mesh.declare("restart", declaration("restart", 2));
    const unsettled = await quiet.delivered();
    expect(unsettled.seq).toBe(next);
    // a crash between the apply and the report in the outbox: never settled
    await second.close();
    const third = new Hearing(await linked("restart"));
    const again = await third.delivered();
    expect([again.seq, contentOf(again)]).toEqual([next, "declaration 2\n"]);
    expect(settledOf(stateOf("restart"), mesh.meshKey.publicB64)).toBe(seq);
    await again.ack();
    expect(settledOf(stateOf("restart"), mesh.meshKey.publicB64)).toBe(next);
  });

  it("finds a push whose wake-up was lost by its look", async () => {
    const link = await linked("lost", { lookMs: 2_000 });
    const hearing = new Hearing(link);
    expect(await hearing.next(500)).toBe("nothing");
    // the wake-up's subscription cut from the client's side: the server sends this link no more wake-ups, as a
    // route cut between servers would lose one
    const nc = (link as unknown as { nc: NatsConnection }).nc;
    const subs = (
      nc as unknown as {
        protocol: { subscriptions: { all(): { getSubject(): string; unsubscribe(): void }[] } };
      }
    ).protocol.subscriptions.all();
    const wake = subs.find((s) => s.getSubject() === "mesh.declare.lost");
    expect(wake).toBeDefined();
    wake?.unsubscribe();
    await nc.flush();
    const seq = await mesh.declare("lost", declaration("lost", 1));
    expect((await hearing.delivered()).seq).toBe(seq);
  });

  it("a user issued for a consumer, with a membership naming none: the link closes saying the server refused the read", async () => {
    const identity = generateKeyPairSync("ed25519").privateKey;
    const b64 = rawPublicOf(identity).toString("base64");
    const { consumer: _dropped, ...direct } = await mesh.admit("older", { identity: b64, reads: "consumer" });
    const opened = await openBound(direct, "older", identity);
    if (!opened.ok) throw new Error(opened.reason);
    links.push(opened.link);
    const hearing = new Hearing(opened.link);
    const ended = await hearing.next();
    expect(ended).not.toBe("nothing");
    expect(ended !== "nothing" && ended.done).toBe(true);
    expect(await opened.link.closed()).toMatch(/refused this node the direct read of its declarations/);
  });

  describe("holding node A's state, as an attacker", () => {
    let nc: NatsConnection;
    let bSeq: number;
    const dec = new TextDecoder();

    beforeAll(async () => {
      const a = await mesh.admit("node-a");
      await mesh.admit("node-b");
      bSeq = await mesh.declare("node-b", declaration("node-b", 1));
      await mesh.declare("node-a", declaration("node-a", 1));
      const dialled = await dial({
        servers: a.servers,
        fingerprint: a.fingerprint,
        auth: mesh.nodeAuth("node-a"),
        inboxPrefix: "_INBOX.node.node-a",
      });
      if (!dialled.ok) throw new Error(dialled.reason);
      nc = dialled.nc;
    });

    afterAll(async () => {
      await nc?.close();
    });

    const refused = async (subject: string, payload: string) =>
      await expect(nc.request(subject, payload, { timeout: 5_000 })).rejects.toThrow(
        /Permissions Violation for Publish/,
      );

    it("reads its own declaration by direct get, and cannot read B's", async () => {
      const own = await nc.request("$JS.API.DIRECT.GET.DECLARE.mesh.declare.node-a", "", { timeout: 5_000 });
      expect(own.headers?.get("Nats-Subject")).toBe("mesh.declare.node-a");
      await refused("$JS.API.DIRECT.GET.DECLARE.mesh.declare.node-b", "");
      await refused("$JS.API.DIRECT.GET.DECLARE.mesh.declare.>", "");
      await refused("$JS.API.DIRECT.GET.DECLARE.mesh.declare.*", "");
    });

    it("cannot reach another subject, stream or API through the direct get it has", async () => {
      await refused("$JS.API.DIRECT.GET.DECLARE", JSON.stringify({ last_by_subj: "mesh.declare.node-b" }));
      await refused("$JS.API.DIRECT.GET.DECLARE", JSON.stringify({ seq: bSeq }));
      await refused("$JS.API.DIRECT.GET.REPORTS.mesh.report.node-b", "");
      await refused(
        "$JS.API.DIRECT.GET.KV_mesh-nodes",
        JSON.stringify({ last_by_subj: "$KV.mesh-nodes.node-b" }),
      );
      await refused("$JS.API.STREAM.MSG.GET.DECLARE", JSON.stringify({ seq: bSeq }));
      // its own direct get with a body naming B's subject or B's sequence: never B's declaration
      for (const body of [{ last_by_subj: "mesh.declare.node-b" }, { seq: bSeq }]) {
        const got = await nc
          .request("$JS.API.DIRECT.GET.DECLARE.mesh.declare.node-a", JSON.stringify(body), { timeout: 5_000 })
          .catch((e: Error) => e);
        if (got instanceof Error) continue;
        expect(got.headers?.get("Nats-Subject") ?? "").not.toBe("mesh.declare.node-b");
        expect(dec.decode(got.data)).not.toContain("node-b");
      }
    });

    it("cannot subscribe to B's wake-up, nor every wake-up", async () => {
      for (const subject of ["mesh.declare.node-b", "mesh.declare.*", "mesh.declare.>"]) {
        const sub = nc.subscribe(subject);
        await expect(sub.closed).resolves.toMatchObject({
          message: expect.stringContaining(`Permissions Violation for Subscription to "${subject}"`),
        });
      }
    });
  });
});
