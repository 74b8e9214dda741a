import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { MAX_BODY_BYTES, MAX_ENVELOPE_BYTES } from "../../src/defaults.ts";
import type { Refusal, TypeSupport } from "../../src/vocabulary/index.ts";
import {
  ed25519PublicFromB64,
  makeMeshKey,
  parseJsonBytes,
  signEnvelope,
  verifyEnvelope,
} from "../../src/vocabulary/index.ts";

const mesh = makeMeshKey();
const NODE = "web-1";
const opts = { meshKey: mesh.publicB64, node: NODE };

function bodyFor(node: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    v: 1,
    node,
    mode: "converged",
    resources: [{ id: "motd", type: "file", path: "/etc/motd", content: "hello\n" }],
    ...extra,
  });
}

function bytesOf(message: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(message), "utf8");
}

function refusalsOf(bytes: Uint8Array, options: Parameters<typeof verifyEnvelope>[1] = opts): Refusal[] {
  const result = verifyEnvelope(bytes, options);
  if (result.ok) throw new Error("expected a refusal");
  expect(result.refusals.length).toBeGreaterThan(0);
  for (const r of result.refusals) {
    expect(r.reason).not.toContain("\n");
    expect(r.reason.length).toBeLessThanOrEqual(300);
  }
  return result.refusals;
}

const SIG_REFUSAL = {
  id: "declaration",
  field: "sig",
  reason: "signature does not verify against the mesh key",
};

describe("verifyEnvelope", () => {
  it("accepts a declaration signed by the mesh key for this node", () => {
    const body = bodyFor(NODE);
    const result = verifyEnvelope(bytesOf(signEnvelope(body, mesh.privateKey)), opts);
    if (!result.ok) throw new Error(JSON.stringify(result.refusals));
    expect(result.body).toBe(body);
    expect(result.declaration.node).toBe(NODE);
    expect(result.declaration.resources.map((r) => r.id)).toEqual(["motd"]);
    expect(result.digest).toBe(createHash("sha256").update(Buffer.from(body, "utf8")).digest("hex"));
  });

  it("signs the body's UTF-8 bytes, non-ASCII included", () => {
    const body = bodyFor(NODE, {
      resources: [{ id: "motd", type: "file", path: "/etc/motd", content: "héllo ✓\n" }],
    });
    const envelope = signEnvelope(body, mesh.privateKey);
    expect(envelope.sig).toMatch(/^[A-Za-z0-9+/]{86}==$/);
    expect(verifyEnvelope(bytesOf(envelope), opts).ok).toBe(true);
  });

  it("refuses a forged signature", () => {
    const envelope = {
      ...signEnvelope(bodyFor(NODE), mesh.privateKey),
      sig: Buffer.alloc(64, 7).toString("base64"),
    };
    expect(refusalsOf(bytesOf(envelope))).toEqual([SIG_REFUSAL]);
  });

  it("refuses a signature by another key", () => {
    const other = makeMeshKey();
    expect(refusalsOf(bytesOf(signEnvelope(bodyFor(NODE), other.privateKey)))).toEqual([SIG_REFUSAL]);
  });

  it("refuses a body changed after signing", () => {
    const envelope = signEnvelope(bodyFor(NODE), mesh.privateKey);
    const tampered = { ...envelope, body: envelope.body.replace("hello", "pwned") };
    expect(refusalsOf(bytesOf(tampered))).toEqual([SIG_REFUSAL]);
  });

  it("refuses a body one whitespace away from what was signed", () => {
    const envelope = signEnvelope(bodyFor(NODE), mesh.privateKey);
    expect(refusalsOf(bytesOf({ ...envelope, body: `${envelope.body} ` }))).toEqual([SIG_REFUSAL]);
  });

  it("refuses a signed body for another node", () => {
    const refusals = refusalsOf(bytesOf(signEnvelope(bodyFor("web-2"), mesh.privateKey)));
    expect(refusals).toEqual([
      { id: "declaration", field: "node", reason: "is for node web-2, not this node web-1" },
    ]);
  });

  it("refuses a signed body that fails the schema, naming the field", () => {
    const body = JSON.stringify({ v: 1, node: NODE, mode: "sometimes", resources: [] });
    const refusals = refusalsOf(bytesOf(signEnvelope(body, mesh.privateKey)));
    expect(refusals.map((r) => r.field)).toContain("mode");
  });

  it("refuses a signed body with a malformed resource, naming the resource", () => {
    const body = bodyFor(NODE, { resources: [{ id: "motd", type: "file", path: "etc/motd", content: "x" }] });
    expect(refusalsOf(bytesOf(signEnvelope(body, mesh.privateKey)))).toEqual([
      { id: "motd", field: "path", reason: "must be absolute" },
    ]);
  });

  it("refuses a signed body this host's types refuse", () => {
    const android: TypeSupport = {
      supports: (t) => ["file", "directory", "action"].includes(t),
      reason: "not on an Android host",
    };
    const body = bodyFor(NODE, { resources: [{ id: "nginx", type: "package", name: "nginx" }] });
    const refusals = refusalsOf(bytesOf(signEnvelope(body, mesh.privateKey)), { ...opts, support: android });
    expect(refusals).toEqual([
      { id: "nginx", field: "type", reason: 'type "package": not on an Android host' },
    ]);
  });

  it("refuses a signed body that is not JSON", () => {
    const refusals = refusalsOf(bytesOf(signEnvelope("{not json", mesh.privateKey)));
    expect(refusals).toHaveLength(1);
    expect(refusals[0]!.reason).toMatch(/^the body is not JSON/);
  });

  it("checks the signature before the schema: an unsigned malformed body says only that it is unsigned", () => {
    const envelope = { ...signEnvelope(bodyFor(NODE), mesh.privateKey), body: "{not json" };
    expect(refusalsOf(bytesOf(envelope))).toEqual([SIG_REFUSAL]);
  });

  it("refuses a message that is not JSON", () => {
    const refusals = refusalsOf(Buffer.from("this is not json"));
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ id: "declaration", field: "" });
    expect(refusals[0]!.reason).toMatch(/^the message is not JSON/);
  });

  it("refuses a message that is not UTF-8", () => {
    expect(refusalsOf(Buffer.from([0x7b, 0xff, 0x7d]))[0]!.reason).toBe("the message is not valid UTF-8");
  });

  it("refuses a huge message by its size, before decoding it", () => {
    const huge = Buffer.alloc(MAX_ENVELOPE_BYTES + 1, 0x20);
    expect(refusalsOf(huge)[0]!.reason).toBe(
      `the message is ${MAX_ENVELOPE_BYTES + 1} bytes, more than the ${MAX_ENVELOPE_BYTES} bytes allowed`,
    );
  });

  it("refuses a signed body over the body limit, though its message fits", () => {
    const body = bodyFor(NODE, { pad: "x".repeat(MAX_BODY_BYTES) });
    const refusals = refusalsOf(bytesOf(signEnvelope(body, mesh.privateKey)));
    expect(refusals[0]!.reason).toMatch(/^the body is \d+ bytes, more than the \d+ bytes allowed$/);
  });

  it("refuses a message nested too deep without overflowing the stack", () => {
    expect(refusalsOf(Buffer.from(`${"[".repeat(100_000)}${"]".repeat(100_000)}`))[0]!.reason).toMatch(
      /nests deeper/,
    );
  });

  it("counts no bracket inside a string, escaped quotes and backslashes included, as nesting", () => {
    const deep = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
    const text = JSON.stringify({ a: `\\"${deep(1000)}`, b: `\\${deep(1000)}\\`, c: deep(3) });
    expect(parseJsonBytes(text)).toMatchObject({ ok: true });
    expect(parseJsonBytes(`{"a":"\\\\"${"[".repeat(1000)}`)).toMatchObject({
      ok: false,
      reason: /nests deeper/,
    });
  });

  it.each([
    ["another version", (e: Record<string, unknown>) => ({ ...e, v: 2 }), "v"],
    ["no signature", ({ sig: _, ...e }: Record<string, unknown>) => e, "sig"],
    [
      "a signature that is not base64 of 64 bytes",
      (e: Record<string, unknown>) => ({ ...e, sig: "abc" }),
      "sig",
    ],
    [
      "a body that is an object, not a string",
      (e: Record<string, unknown>) => ({ ...e, body: JSON.parse(e.body as string) }),
      "body",
    ],
    ["an unknown field", (e: Record<string, unknown>) => ({ ...e, key: mesh.publicB64 }), "key"],
  ])("refuses an envelope with %s, naming the field", (_, change, field) => {
    const envelope = signEnvelope(bodyFor(NODE), mesh.privateKey) as unknown as Record<string, unknown>;
    expect(refusalsOf(bytesOf(change(envelope))).map((r) => r.field)).toContain(field);
  });

  it("refuses a message that is not an object", () => {
    expect(refusalsOf(bytesOf([1, 2, 3]))).toHaveLength(1);
  });

  it("refuses a body with a lone surrogate, which two different bodies could share a signature through", () => {
    const body = bodyFor(NODE).replace("hello", "\ud800");
    const envelope = signEnvelope(body, mesh.privateKey);
    const refusals = refusalsOf(bytesOf(envelope));
    expect(refusals).toEqual([
      { id: "declaration", field: "body", reason: "is not well-formed Unicode (a lone surrogate)" },
    ]);
  });

  it("refuses, naming the mesh key, when the membership's key is not one", () => {
    const envelope = signEnvelope(bodyFor(NODE), mesh.privateKey);
    const refusals = refusalsOf(bytesOf(envelope), { ...opts, meshKey: "not-a-key" });
    expect(refusals).toEqual([
      {
        id: "declaration",
        field: "mesh_key",
        reason: "the membership's mesh key is not an Ed25519 public key (standard base64 of 32 bytes)",
      },
    ]);
  });
});

describe("ed25519PublicFromB64", () => {
  it("reads the mesh key's raw 32 bytes as an Ed25519 public key", () => {
    const key = ed25519PublicFromB64(mesh.publicB64);
    expect(key.ok && key.key.asymmetricKeyType).toBe("ed25519");
  });

  it.each([
    ["too short", Buffer.alloc(31).toString("base64")],
    ["base64url", mesh.publicB64.replace(/\+/g, "-").replace(/\//g, "_")],
    ["unpadded", mesh.publicB64.replace(/=$/, "")],
    ["hex", Buffer.from(mesh.publicB64, "base64").toString("hex")],
  ])("refuses a key %s", (_, text) => {
    // a base64url key without + or / is also valid base64; only a key that differs can be refused
    if (text === mesh.publicB64) return;
    expect(ed25519PublicFromB64(text).ok).toBe(false);
  });
});
