// Keys as raw bytes and their one spelling (protocol.md, "Encodings"): the pure half of key handling, shared by
// the host's store, the sealing and the operator's side (src/mesh/), none of which touches a file here.
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";

export type KeyKind = "ed25519" | "x25519";

/** Private and public as KeyObjects: inspecting or JSON-stringifying one shows no key material. */
export interface KeyPair {
  privateKey: KeyObject;
  publicKey: KeyObject;
}

// DER headers that turn 32 raw bytes into the PKCS#8 / SPKI documents Node's crypto imports.
const PKCS8_PREFIX: Record<KeyKind, Buffer> = {
  ed25519: Buffer.from("302e020100300506032b657004220420", "hex"),
  x25519: Buffer.from("302e020100300506032b656e04220420", "hex"),
};
const SPKI_PREFIX: Record<KeyKind, Buffer> = {
  ed25519: Buffer.from("302a300506032b6570032100", "hex"),
  x25519: Buffer.from("302a300506032b656e032100", "hex"),
};

const RAW_KEY_B64 = /^[A-Za-z0-9+/]{43}=$/;

export function keyPairFromRaw(kind: KeyKind, rawPrivate: Uint8Array): KeyPair {
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX[kind], rawPrivate]),
    format: "der",
    type: "pkcs8",
  });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

export function publicKeyFromRaw(kind: KeyKind, rawPublic: Uint8Array): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX[kind], rawPublic]), format: "der", type: "spki" });
}

/** 32 raw bytes from standard padded base64, or null: strict, so one key has one spelling. */
export function rawKeyFromB64(text: string): Buffer | null {
  if (!RAW_KEY_B64.test(text)) return null;
  const raw = Buffer.from(text, "base64");
  return raw.toString("base64") === text ? raw : null;
}

export function rawPublicOf(key: KeyObject): Buffer {
  const jwk = (key.type === "private" ? createPublicKey(key) : key).export({ format: "jwk" });
  return Buffer.from(jwk.x ?? "", "base64url");
}
