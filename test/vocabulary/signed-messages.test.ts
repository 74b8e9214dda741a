// A node's signed messages (src/vocabulary/signed.ts), generated: whatever a report says, signed by the node it
// verifies as that node's and yields exactly what was signed; any change to a byte of the body or the signature,
// another key, another node's subject, or the other kind's subject, and it does not. And the one sanitiser:
// whatever a node says comes out with no character a terminal obeys, and escaping twice changes nothing.
import { generateKeyPairSync } from "node:crypto";
import { fc, test } from "@fast-check/vitest";
import { describe, expect } from "vitest";
import { printable } from "../../src/printable.ts";
import { type Report, rawPublicOf, signMessage, verifyNodeMessage } from "../../src/vocabulary/index.ts";

const node = generateKeyPairSync("ed25519");
const other = generateKeyPairSync("ed25519");
const nodeKey = rawPublicOf(node.publicKey).toString("base64");
const bytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

const text = fc.string({ unit: "binary", maxLength: 40 });
const report = fc
  .record({
    id: text,
    type: text,
    detail: text,
    reason: text,
    version: text,
  })
  .map(
    (r): Report => ({
      v: 1,
      node: "web-1",
      declaration: { seq: 3, digest: "a".repeat(64) },
      outcome: "failed",
      started_at: "2026-01-05T10:00:00.000Z",
      finished_at: "2026-01-05T10:00:01.000Z",
      steps: [{ id: r.id, type: r.type, did: "failed", detail: r.detail }],
      holds: [],
      refusals: [{ id: r.id, field: "x", reason: r.reason }],
      host: { version: r.version, os: "arch" },
    }),
  );

describe("signed node messages, generated", () => {
  test.prop([report])("signed by the node: verified, and exactly what it signed", (r) => {
    const verified = verifyNodeMessage(bytes(signMessage(r, node.privateKey)), "report", "web-1", nodeKey);
    expect(verified).toMatchObject({ ok: true });
    if (verified.ok) expect(verified.value).toEqual(r);
  });

  test.prop([report, fc.nat(), fc.integer({ min: 1, max: 255 }), fc.boolean()])(
    "one byte changed, in the body or the signature: not the node's",
    (r, at, flip, inSig) => {
      const signed = signMessage(r, node.privateKey);
      const field = inSig ? Buffer.from(signed.sig, "base64") : Buffer.from(signed.body, "utf8");
      field[at % field.length] = field[at % field.length]! ^ flip;
      const changed = inSig
        ? { ...signed, sig: field.toString("base64") }
        : { ...signed, body: field.toString("utf8") };
      expect(verifyNodeMessage(bytes(changed), "report", "web-1", nodeKey).ok).toBe(false);
    },
  );

  test.prop([report])(
    "another key, another node's subject, the other kind, or unsigned: not the node's",
    (r) => {
      const signed = signMessage(r, node.privateKey);
      expect(verifyNodeMessage(bytes(signMessage(r, other.privateKey)), "report", "web-1", nodeKey).ok).toBe(
        false,
      );
      expect(verifyNodeMessage(bytes(signed), "report", "web-2", nodeKey).ok).toBe(false);
      expect(verifyNodeMessage(bytes(signed), "heartbeat", "web-1", nodeKey).ok).toBe(false);
      expect(verifyNodeMessage(bytes(r), "report", "web-1", nodeKey).ok).toBe(false);
    },
  );
});

describe("the one sanitiser, generated", () => {
  const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
  test.prop([fc.string({ unit: "binary", maxLength: 200 }), fc.integer({ min: 1, max: 120 })])(
    "nothing a terminal obeys comes out; twice is once; a cut is a prefix",
    (s, max) => {
      const once = printable(s);
      expect(once).not.toMatch(UNSAFE);
      expect(printable(once)).toBe(once);
      const cut = printable(s, max);
      expect(cut).not.toMatch(UNSAFE);
      if (cut !== once) expect(once.startsWith(cut.slice(0, -1))).toBe(true);
    },
  );
});
