// The wire fixtures (protocol.md): the one agreement that survives two repositories. Each parses against
// its schema and re-serialises to exactly the bytes it was read from (same keys, same order, nothing
// coerced); the envelope verifies against the fixture mesh key, and signing its body again with that key
// reproduces the signature (Ed25519 is deterministic), so the host produces the envelope byte for byte. The
// signed report and heartbeat are the node's messages as the wire carries them (protocol.md, "Node messages"):
// each verifies against the fixture identity key, and the node signs the plain fixture to exactly them.

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  Envelope,
  Heartbeat,
  keyPairFromRaw,
  Membership,
  Report,
  SignedMessage,
  signEnvelope,
  signMessage,
  verifyEnvelope,
  verifyNodeMessage,
} from "../../src/vocabulary/index.ts";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url), "utf8");
/** The wire form of a fixture: compact JSON in the file's own key order. */
const wire = (name: string) => JSON.stringify(JSON.parse(fixture(name)));
const meshKey = JSON.parse(fixture("mesh-key.json")) as { public: string; seed: string };
/** The node's identity key (web-1): what the declaration is addressed to, and what signs its messages. */
const identityKey = JSON.parse(fixture("identity-key.json")) as { public: string; seed: string };
const bytesOf = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe("wire fixtures", () => {
  const cases = [
    ["envelope.json", Envelope],
    ["membership.json", Membership],
    ["report.json", Report],
    ["heartbeat.json", Heartbeat],
    ["report.signed.json", SignedMessage],
    ["heartbeat.signed.json", SignedMessage],
  ] as const;

  for (const [name, schema] of cases) {
    it(`${name} parses and re-serialises byte for byte`, () => {
      const parsed = schema.parse(JSON.parse(fixture(name)));
      expect(JSON.stringify(parsed)).toBe(wire(name));
    });
  }

  it("the envelope verifies against the fixture mesh key, for its node", () => {
    const bytes = new TextEncoder().encode(wire("envelope.json"));
    const verified = verifyEnvelope(bytes, { meshKey: meshKey.public, node: "web-1" });
    expect(verified.ok).toBe(true);
    if (!verified.ok) return;
    expect(verified.declaration.node).toBe("web-1");
    // the signed order the link requires (protocol.md, "The signed order")
    expect(verified.declaration).toMatchObject({ serial: 3, issued_at: "2026-01-05T09:59:58Z" });
    // addressed: the node's identity key is in the signed body (protocol.md, "Addressed")
    expect(verified.declaration.to).toBe(identityKey.public);
    // the report fixture names this declaration by its digest
    const report = Report.parse(JSON.parse(fixture("report.json")));
    expect(report.declaration.digest).toBe(verified.digest);
    expect(verified.digest).toBe(createHash("sha256").update(verified.body).digest("hex"));
  });

  it("the envelope is produced byte for byte from its body and the mesh key", () => {
    const envelope = Envelope.parse(JSON.parse(fixture("envelope.json")));
    const { privateKey } = keyPairFromRaw("ed25519", Buffer.from(meshKey.seed, "base64"));
    expect(JSON.stringify(signEnvelope(envelope.body, privateKey))).toBe(wire("envelope.json"));
  });

  it("the envelope is addressed to the fixture identity key, and refused by any other, or with no address", () => {
    const bytes = new TextEncoder().encode(wire("envelope.json"));
    const opts = { meshKey: meshKey.public, node: "web-1" };
    expect(verifyEnvelope(bytes, { ...opts, identity: identityKey.public }).ok).toBe(true);
    const other = verifyEnvelope(bytes, { ...opts, identity: `${"A".repeat(42)}E=` });
    expect(other).toMatchObject({ ok: false, refusals: [{ field: "to" }] });
    const { privateKey } = keyPairFromRaw("ed25519", Buffer.from(meshKey.seed, "base64"));
    const body = JSON.parse(Envelope.parse(JSON.parse(fixture("envelope.json"))).body);
    delete body.to;
    const unaddressed = bytesOf(signEnvelope(JSON.stringify(body), privateKey));
    expect(verifyEnvelope(unaddressed, { ...opts, identity: identityKey.public })).toMatchObject({
      ok: false,
      refusals: [{ field: "to", reason: expect.stringContaining("is required") }],
    });
    // what was judged on arrival (the kept declaration) is verified without an address
    expect(verifyEnvelope(unaddressed, opts).ok).toBe(true);
  });

  for (const kind of ["report", "heartbeat"] as const) {
    it(`the signed ${kind} verifies against the fixture identity key, and is produced byte for byte`, () => {
      const signed = new TextEncoder().encode(wire(`${kind}.signed.json`));
      const verified = verifyNodeMessage(signed, kind, "web-1", identityKey.public);
      expect(verified).toMatchObject({ ok: true, body: wire(`${kind}.json`) });
      const { privateKey } = keyPairFromRaw("ed25519", Buffer.from(identityKey.seed, "base64"));
      const plain = (kind === "report" ? Report : Heartbeat).parse(JSON.parse(fixture(`${kind}.json`)));
      expect(JSON.stringify(signMessage(plain, privateKey))).toBe(wire(`${kind}.signed.json`));
    });

    it(`a ${kind} signed by another key, tampered, unsigned, of another node or of another kind is refused`, () => {
      const message = SignedMessage.parse(JSON.parse(fixture(`${kind}.signed.json`)));
      const check = (bytes: Uint8Array, node = "web-1") =>
        verifyNodeMessage(bytes, kind, node, identityKey.public);
      const forged = signMessage(
        JSON.parse(message.body),
        keyPairFromRaw("ed25519", Buffer.alloc(32, 7)).privateKey,
      );
      expect(check(bytesOf(forged))).toMatchObject({
        ok: false,
        reason: expect.stringContaining("signature"),
      });
      const tampered = { ...message, body: message.body.replace("web-1", "web-2") };
      expect(check(bytesOf(tampered)).ok).toBe(false);
      expect(check(new TextEncoder().encode(wire(`${kind}.json`)))).toMatchObject({ ok: false });
      expect(check(bytesOf(message), "web-2")).toMatchObject({ ok: false });
      const other = kind === "report" ? "heartbeat" : "report";
      expect(verifyNodeMessage(bytesOf(message), other, "web-1", identityKey.public).ok).toBe(false);
    });
  }

  it("the membership carries the fixture mesh key and the names protocol.md composes", () => {
    const m = Membership.parse(JSON.parse(fixture("membership.json")));
    expect(m.mesh_key).toBe(meshKey.public);
    expect([m.user, m.stream, m.consumer, m.subject]).toEqual([
      "node.web-1",
      "DECLARE",
      "node-web-1",
      "mesh.declare.web-1",
    ]);
  });

  it("a forged envelope, a declaration for another node and a body off the schema are refused", () => {
    const envelope = Envelope.parse(JSON.parse(fixture("envelope.json")));
    const bytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
    const forged = verifyEnvelope(bytes({ ...envelope, body: envelope.body.replace("0644", "0666") }), {
      meshKey: meshKey.public,
      node: "web-1",
    });
    expect(forged).toMatchObject({ ok: false, refusals: [{ field: "sig" }] });
    const other = verifyEnvelope(bytes(envelope), { meshKey: meshKey.public, node: "web-2" });
    expect(other).toMatchObject({ ok: false, refusals: [{ field: "node" }] });
    const { privateKey } = keyPairFromRaw("ed25519", Buffer.from(meshKey.seed, "base64"));
    const offSchema = signEnvelope(
      JSON.stringify({ v: 1, node: "web-1", mode: "sideways", resources: [] }),
      privateKey,
    );
    expect(verifyEnvelope(bytes(offSchema), { meshKey: meshKey.public, node: "web-1" }).ok).toBe(false);
  });
});
