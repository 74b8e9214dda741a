// The wire fixtures (protocol.md): the one agreement that survives two repositories. Each parses against
// its schema and re-serialises to exactly the bytes it was read from (same keys, same order, nothing
// coerced); the envelope verifies against the fixture mesh key, and signing its body again with that key
// reproduces the signature (Ed25519 is deterministic), so the host produces the envelope byte for byte.

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  Envelope,
  Heartbeat,
  keyPairFromRaw,
  Membership,
  Report,
  signEnvelope,
  verifyEnvelope,
} from "../src/vocabulary/index.ts";

const fixture = (name: string) => readFileSync(new URL(`fixtures/${name}`, import.meta.url), "utf8");
/** The wire form of a fixture: compact JSON in the file's own key order. */
const wire = (name: string) => JSON.stringify(JSON.parse(fixture(name)));
const meshKey = JSON.parse(fixture("mesh-key.json")) as { public: string; seed: string };

describe("wire fixtures", () => {
  const cases = [
    ["envelope.json", Envelope],
    ["membership.json", Membership],
    ["report.json", Report],
    ["heartbeat.json", Heartbeat],
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
