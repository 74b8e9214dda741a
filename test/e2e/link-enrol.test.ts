// Enrolment against a real server (protocol.md "Enrolment"): the question through the mesh's ENROL stream,
// the answer at the address in the payload, a refusal with its reason, a timeout that says so.
import type { KeyObject } from "node:crypto";
import { arch, hostname, platform } from "node:os";
import { jetstream } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENROL_TIMEOUT_MS, VERSION } from "../../src/defaults.ts";
import { type Asking, ask, dial, openLink } from "../../src/link/index.ts";
import { ensureStreams, reply, sealedAnswer } from "../../src/mesh/index.ts";
import { makeKeys, publicKeys } from "../../src/store/keys.ts";
import { decodeCode } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS, MeshDouble, waitFor } from "../mesh/index.ts";

/** How long the second attempt waits: far longer than a stale answer published at once takes to arrive. */
const STALE_WAIT_MS = 5_000;

const facts = { os: platform(), arch: arch(), hostname: hostname(), version: VERSION };

async function asking(
  mesh: MeshDouble,
  node: string,
): Promise<{ approach: Parameters<typeof ask>[0]; asked: Asking; identity: KeyObject }> {
  const { code } = await mesh.enrolmentCode(node);
  const decoded = decodeCode(code);
  if (!decoded.ok) throw new Error(decoded.reason);
  if (!("jwt" in decoded.value)) throw new Error("the double makes v2 codes");
  const { servers, fingerprint, transport, jwt, seed } = decoded.value;
  const keys = makeKeys();
  return {
    approach: { servers, fingerprint, transport },
    asked: {
      node,
      credential: { jwt, seed },
      keys: publicKeys(keys),
      sealing: keys.sealing.privateKey,
      facts,
    },
    identity: keys.identity.privateKey,
  };
}

describe("enrolment", () => {
  let mesh: MeshDouble;

  beforeAll(async () => {
    mesh = await MeshDouble.start();
  });

  afterAll(async () => {
    await mesh?.stop();
  });

  it("asks through the ENROL stream and is answered with a membership that links", async () => {
    const { approach, asked, identity } = await asking(mesh, "alpha");
    const answered = await ask(approach, asked);
    expect(answered.ok).toBe(true);
    if (!answered.ok) return;
    expect(answered.membership).toMatchObject({
      user: "node.alpha",
      stream: "DECLARE",
      consumer: "node-alpha",
      subject: "mesh.declare.alpha",
      fingerprint: mesh.fingerprint,
      mesh_key: mesh.meshKey.publicB64,
    });
    const seen = await mesh.awaitEnrolment(1);
    expect(seen.subject).toBe("mesh.enrol.alpha");
    expect(seen.question).toMatchObject({ v: 1, node: "alpha", keys: asked.keys, facts });
    // the reply address travels in the payload, under the enrol user's inbox, with a random tail...
    expect(seen.question?.reply).toMatch(/^_INBOX\.enrol\.alpha\.[0-9a-f]{24}$/);
    // ...because by the time the mesh's consumer sees the message, the transport's reply field is the
    // consumer's ack address, not the node's inbox
    expect(seen.transportReply).not.toBe(seen.question?.reply);
    expect(seen.transportReply).not.toMatch(/^_INBOX\./);
    expect(seen.transportReply).toMatch(/^\$JS\.ACK\.ENROL\./);
    // no private key travels
    expect(JSON.stringify(seen.question)).not.toMatch(/private|seed/);

    // the node signs in with the identity key the question carried: the membership's JWT names it
    const opened = await openLink(answered.membership, "alpha", identity);
    expect(opened.ok).toBe(true);
    if (!opened.ok) return;
    expect(await opened.link.bind()).toEqual({ ok: true });
    await opened.link.close();
  });

  it("a fresh reply tail per attempt", async () => {
    const { approach, asked } = await asking(mesh, "twice");
    const before = mesh.enrolments.length;
    expect((await ask(approach, asked)).ok).toBe(true);
    expect((await ask(approach, asked)).ok).toBe(true);
    const [a, b] = mesh.enrolments.slice(before);
    expect(a?.question?.reply).not.toBe(b?.question?.reply);
  });

  it("a stale answer, sent to an earlier attempt's reply tail, is ignored (issue 27, item 17)", async () => {
    const { approach, asked } = await asking(mesh, "stale");
    mesh.setEnrolPolicy("stale", { answer: "ignore" });
    const before = mesh.enrolments.length;
    const first = await ask(approach, asked, { timeoutMs: 300 });
    expect(first.ok || first.kind).toBe("timeout");
    const old = mesh.enrolments[before]!.question!;
    // the second attempt, the mesh still silent; while it waits, the answer to the first attempt arrives
    const second = ask(approach, asked, { timeoutMs: STALE_WAIT_MS });
    await waitFor(() => mesh.enrolments.length >= before + 2, EVENT_WAIT_MS, "the second question");
    expect(mesh.enrolments[before + 1]!.question!.reply).not.toBe(old.reply);
    await reply(mesh.nc, "stale", old.reply, sealedAnswer(old, await mesh.admit("stale")));
    const answered = await second;
    // the membership it carried was a real one, sealed to this node's key: only the tail tells it apart
    expect(answered.ok || answered.kind).toBe("timeout");
  });

  it("says the mesh's refusal with its reason", async () => {
    const { approach, asked } = await asking(mesh, "refused");
    mesh.setEnrolPolicy("refused", { answer: "refuse", reason: "this machine is not on the list" });
    const answered = await ask(approach, asked);
    expect(answered).toEqual({
      ok: false,
      kind: "refused",
      reason: "the mesh refused the enrolment: this machine is not on the list",
    });
  });

  it("says a timeout, and what happened to the question", async () => {
    const { approach, asked } = await asking(mesh, "silent");
    mesh.setEnrolPolicy("silent", { answer: "ignore" });
    const started = Date.now();
    const answered = await ask(approach, asked, { timeoutMs: 300 });
    // the given wait, not the default one: far short of ENROL_TIMEOUT_MS however busy the machine
    expect(Date.now() - started).toBeLessThan(ENROL_TIMEOUT_MS / 2);
    expect(answered.ok).toBe(false);
    if (answered.ok) return;
    expect(answered.kind).toBe("timeout");
    expect(answered.reason).toMatch(
      /did not answer within 300 ms \(the question was kept as ENROL message \d+\)/,
    );
  });

  it("an enrolling user cut while it waits (its code spent a moment before) is a refusal of the code, not a bus away", async () => {
    const { code } = await mesh.enrolmentCode("cut");
    const decoded = decodeCode(code);
    if (!decoded.ok || !("jwt" in decoded.value)) throw new Error("the double makes v2 codes");
    const { servers, fingerprint, transport, jwt, seed } = decoded.value;
    const keys = makeKeys();
    mesh.setEnrolPolicy("cut", { answer: "ignore" });
    const seen = mesh.enrolments.length;
    const answered = ask(
      { servers, fingerprint, transport },
      {
        node: "cut",
        credential: { jwt, seed },
        keys: publicKeys(keys),
        sealing: keys.sealing.privateKey,
        facts,
      },
    );
    await waitFor(
      () => mesh.enrolments.slice(seen).some((e) => e.question?.node === "cut"),
      EVENT_WAIT_MS,
      "the question",
    );
    // as the controller does a moment after another enrolment spent the code
    await mesh.revokeCode(code);
    expect(await answered).toEqual({
      ok: false,
      kind: "auth",
      reason:
        "cannot enrol: the bus withdrew enrol.cut's credentials while it asked: the enrolment code is wrong, already used, expired or withdrawn; ask the operator for a new one",
    });
  });

  it("a wrong seed is an authentication error that never quotes the seed", async () => {
    const { approach, asked } = await asking(mesh, "badtoken");
    const { asked: other } = await asking(mesh, "badtoken2");
    const seed = (other.credential as { seed: string }).seed;
    const answered = await ask(approach, { ...asked, credential: { ...asked.credential, seed } as never });
    expect(answered.ok).toBe(false);
    if (answered.ok) return;
    expect(answered.kind).toBe("auth");
    expect(answered.reason).toContain("refused enrol.badtoken's credentials");
    expect(answered.reason).toContain("the enrolment code is wrong, already used, expired or withdrawn");
    expect(answered.reason).not.toMatch(/Authorization Violation/i);
    expect(answered.reason).not.toContain(seed);
    expect(answered.reason).not.toContain((asked.credential as { seed: string }).seed);
  });

  it("a v1 code (a password) still dials, and a wrong one is an authentication error never quoting it", async () => {
    const { approach, asked } = await asking(mesh, "oldcode");
    const answered = await ask(approach, { ...asked, credential: { token: "wrong-token-secret-42" } });
    expect(answered).toMatchObject({ ok: false, kind: "auth" });
    expect(JSON.stringify(answered)).not.toContain("wrong-token-secret-42");
  });

  it("the enrolling user may ask for itself only, and listen only under its own inbox", async () => {
    const { approach, asked } = await asking(mesh, "gamma");
    // another node's code asks for nothing but its own node
    expect(await ask(approach, { ...asked, node: "delta" })).toMatchObject({ ok: false });
    const dialled = await dial({
      servers: approach.servers,
      fingerprint: approach.fingerprint,
      auth: mesh.enrolAuth("gamma", (await mesh.enrolmentCode("gamma")).code),
      inboxPrefix: "_INBOX.enrol.gamma",
    });
    expect(dialled.ok).toBe(true);
    if (!dialled.ok) return;
    const nc = dialled.nc;
    const js = jetstream(nc);
    await expect(js.publish("mesh.enrol.delta", "{}", { timeout: 2000 })).rejects.toThrow(
      'Permissions Violation for Publish to "mesh.enrol.delta"',
    );
    const sub = nc.subscribe("_INBOX.node.gamma.x");
    await expect(sub.closed).resolves.toMatchObject({
      message: expect.stringContaining('Permissions Violation for Subscription to "_INBOX.node.gamma.x"'),
    });
    await nc.close();
  });

  it("a refused or timed-out enrolment never quotes the token", async () => {
    const { approach, asked } = await asking(mesh, "quiet");
    mesh.setEnrolPolicy("quiet", { answer: "ignore" });
    const answered = await ask(approach, asked, { timeoutMs: 200 });
    expect(JSON.stringify(answered)).not.toContain((asked.credential as { seed: string }).seed);
  });

  // last: it takes the mesh's ENROL stream away
  it("a bus with no ENROL stream is said within the question's ack patience, not the answer's wait", async () => {
    const { approach, asked } = await asking(mesh, "early");
    await mesh.jsm.streams.delete("ENROL");
    const started = Date.now();
    const answered = await ask(approach, asked);
    // asked again for ENROL_ACK_PATIENCE_MS (a cluster may still be electing ENROL's leader), not waited out: far
    // short of the ENROL_TIMEOUT_MS it would otherwise wait, however busy the machine
    expect(Date.now() - started).toBeLessThan(ENROL_TIMEOUT_MS / 2);
    // across accounts the server cannot say "no responders" (NODES imports the subject whoever keeps it), so the
    // question goes unacknowledged, said as such
    expect(answered).toMatchObject({ ok: false, kind: "unreachable" });
    if (!answered.ok) expect(answered.reason).toContain("the question was not acknowledged");
  });

  // after the one above: ENROL is gone until the first question has been seen (a cluster electing its leader)
  it("a first question the bus left unacknowledged is asked again, and answered once ENROL keeps it", async () => {
    const { approach, asked } = await asking(mesh, "late");
    await mesh.jsm.streams.delete("ENROL").catch(() => false);
    const seen = new Promise<void>((resolve) => {
      mesh.nc.subscribe("mesh.enrol.late", { max: 1, callback: () => resolve() });
    });
    await mesh.nc.flush();
    const answering = ask(approach, asked);
    await seen;
    await ensureStreams({ nc: mesh.nc, js: mesh.js, jsm: mesh.jsm, close: async () => {} }, 1);
    const answered = await answering;
    expect(answered.ok, answered.ok ? "" : answered.reason).toBe(true);
  });
});

// nats.js 3.4 settles no flush pending when its connection closes: an answer waiting on a bus that never
// confirmed it held the double's consume loop, and with it the double's stop, for good (an afterAll timed out)
describe("an answer the bus has not confirmed when the controller closes", () => {
  it("is said as not confirmed, and the controller stops", async () => {
    const own = await MeshDouble.start();
    try {
      own.pauseServer();
      const replying = reply(own.nc, "gone", "_INBOX.enrol.gone.0123456789abcdef01234567", { v: 1 }).then(
        () => "confirmed",
        (e: Error) => e.message,
      );
      await own.nc.close();
      const said = await Promise.race([
        replying,
        new Promise((r) => setTimeout(() => r("still waiting"), EVENT_WAIT_MS)),
      ]);
      expect(said).toBe("the connection to the bus closed before the bus confirmed the answer");
    } finally {
      own.resumeServer();
      await own.stop();
    }
  });
});
