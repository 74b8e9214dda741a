import { readFileSync } from "node:fs";
import { fc, test } from "@fast-check/vitest";
import { describe, expect, it } from "vitest";
import { makeKeyPair, publicB64 } from "../../src/store/keys.ts";
import { keyPairFromRaw, seal, unseal } from "../../src/vocabulary/index.ts";

interface SealedFixture {
  recipient_private: string;
  recipient_public: string;
  ephemeral_private: string;
  ephemeral_public: string;
  nonce: string;
  plaintext: string;
  sealed: string;
}

const fixture = JSON.parse(
  readFileSync(new URL("../fixtures/sealed.json", import.meta.url), "utf8"),
) as SealedFixture;
const recipient = keyPairFromRaw("x25519", Buffer.from(fixture.recipient_private, "base64"));

const REFUSED = "not sealed to this node's key or tampered";

/** Everything a reason must never carry: the plaintext and every key of the fixture. */
const SECRETS = [
  fixture.plaintext.trim(),
  fixture.recipient_private,
  fixture.ephemeral_private,
  Buffer.from(fixture.recipient_private, "base64").toString("hex"),
];

function refusalOf(value: string, key = recipient.privateKey): string {
  const result = unseal(value, key);
  if (result.ok) throw new Error("expected a refusal");
  expect(result.reason).not.toContain("\n");
  for (const secret of SECRETS) expect(result.reason).not.toContain(secret);
  return result.reason;
}

function flipByte(b64: string, index: number): string {
  const bytes = Buffer.from(b64, "base64");
  const at = index < 0 ? bytes.byteLength + index : index;
  bytes[at] = bytes[at]! ^ 0x01;
  return bytes.toString("base64");
}

function withPart(value: string, index: number, part: string): string {
  const parts = value.split(":");
  parts[index] = part;
  return parts.join(":");
}

describe("the sealed fixture", () => {
  it("holds a recipient public key derived from its private key", () => {
    expect(publicB64(recipient.publicKey)).toBe(fixture.recipient_public);
    expect(fixture.sealed.split(":")[1]).toBe(fixture.ephemeral_public);
  });

  it("unseals to its plaintext", () => {
    const result = unseal(fixture.sealed, recipient.privateKey);
    expect(result.ok && result.bytes.toString("utf8")).toBe(fixture.plaintext);
  });

  it("is reproduced exactly by sealing with its ephemeral key and nonce", () => {
    const sealed = seal(Buffer.from(fixture.plaintext, "utf8"), fixture.recipient_public, {
      ephemeralPrivate: Buffer.from(fixture.ephemeral_private, "base64"),
      nonce: Buffer.from(fixture.nonce, "base64"),
    });
    expect(sealed).toBe(fixture.sealed);
  });
});

describe("seal and unseal", () => {
  test.prop([fc.uint8Array({ maxLength: 4096 })], { numRuns: 50 })("round-trip any bytes", (bytes) => {
    const node = makeKeyPair("x25519");
    const result = unseal(seal(bytes, publicB64(node.publicKey)), node.privateKey);
    expect(result.ok && new Uint8Array(result.bytes)).toEqual(bytes);
  });

  it("uses a fresh ephemeral key and nonce for every value", () => {
    const a = seal(Buffer.from("x"), fixture.recipient_public).split(":");
    const b = seal(Buffer.from("x"), fixture.recipient_public).split(":");
    expect(a[1]).not.toBe(b[1]);
    expect(a[2]).not.toBe(b[2]);
  });

  it("refuses a value sealed to another node's key", () => {
    const other = makeKeyPair("x25519");
    const sealed = seal(Buffer.from(fixture.plaintext), publicB64(other.publicKey));
    expect(refusalOf(sealed)).toBe(REFUSED);
    expect(refusalOf(fixture.sealed, other.privateKey)).toBe(REFUSED);
  });

  it("refuses a flipped byte anywhere: tag, ciphertext, nonce, ephemeral key", () => {
    const [, eph, nonce, body] = fixture.sealed.split(":") as [string, string, string, string];
    expect(refusalOf(withPart(fixture.sealed, 3, flipByte(body, -1)))).toBe(REFUSED);
    expect(refusalOf(withPart(fixture.sealed, 3, flipByte(body, 0)))).toBe(REFUSED);
    expect(refusalOf(withPart(fixture.sealed, 2, flipByte(nonce, 5)))).toBe(REFUSED);
    expect(refusalOf(withPart(fixture.sealed, 1, flipByte(eph, 3)))).toBe(REFUSED);
  });

  it("refuses a low-order ephemeral point as tampered, not as a crash", () => {
    expect(refusalOf(withPart(fixture.sealed, 1, Buffer.alloc(32).toString("base64")))).toBe(REFUSED);
  });

  it.each([
    ["empty", ""],
    ["no separators", "v1"],
    ["too few parts", "v1:a:b"],
    ["too many parts", `${fixture.sealed}:AAAA`],
    ["another version", fixture.sealed.replace(/^v1:/, "v2:")],
    ["an ephemeral key of 31 bytes", withPart(fixture.sealed, 1, Buffer.alloc(31, 1).toString("base64"))],
    ["an ephemeral key that is not base64", withPart(fixture.sealed, 1, "!".repeat(44))],
    [
      "base64url in place of base64",
      withPart(fixture.sealed, 1, fixture.ephemeral_public.replace(/\//g, "_")),
    ],
    ["a nonce of 16 bytes", withPart(fixture.sealed, 2, Buffer.alloc(16).toString("base64"))],
    ["a nonce without its padding", withPart(fixture.sealed, 2, "AAECAwQFBgcICQo")],
    ["a ciphertext shorter than a tag", withPart(fixture.sealed, 3, Buffer.alloc(15).toString("base64"))],
    ["a ciphertext with junk in it", withPart(fixture.sealed, 3, `${fixture.sealed.split(":")[3]} `)],
  ])("refuses a malformed value: %s", (_, value) => {
    expect(refusalOf(value)).toMatch(/^malformed sealed value: /);
  });

  it("opens an empty plaintext (a tag alone)", () => {
    const result = unseal(seal(new Uint8Array(), fixture.recipient_public), recipient.privateKey);
    expect(result.ok && result.bytes.byteLength).toBe(0);
  });

  it("refuses to unseal with a key that is not an X25519 private key", () => {
    const identity = makeKeyPair("ed25519");
    expect(refusalOf(fixture.sealed, identity.privateKey)).toMatch(/not an X25519 private key/);
    expect(refusalOf(fixture.sealed, recipient.publicKey)).toMatch(/not an X25519 private key/);
  });

  it("throws on the mesh's side for a recipient key that is not one", () => {
    expect(() => seal(Buffer.from("x"), "nope")).toThrow(/recipient sealing key/);
    expect(() => seal(Buffer.from("x"), fixture.recipient_public, { nonce: new Uint8Array(8) })).toThrow(
      /nonce/,
    );
  });
});
