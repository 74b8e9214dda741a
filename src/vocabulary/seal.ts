// Sealed values (protocol.md): X25519 from a fresh ephemeral key to the node's sealing key, HKDF-SHA256,
// AES-256-GCM. `seal` is the mesh's side (src/mesh/, tests, the mesh double); the host only unseals. Pure, so
// both sides import it from the vocabulary. A reason never carries the plaintext or any key material: a sealed
// value is never logged or reported.
import {
  createCipheriv,
  createDecipheriv,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from "node:crypto";
import { keyPairFromRaw, publicKeyFromRaw, rawKeyFromB64, rawPublicOf } from "./raw-keys.ts";

export const SEAL_VERSION = "v1";
const SEAL_INFO = "mesh seal v1";
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

export interface SealOptions {
  /** Raw 32-byte X25519 private key; fixed only to reproduce a fixture. */
  ephemeralPrivate?: Uint8Array;
  /** 12 bytes; fixed only to reproduce a fixture. */
  nonce?: Uint8Array;
}

export type Unsealed = { ok: true; bytes: Buffer } | { ok: false; reason: string };

const REFUSED = "not sealed to this node's key or tampered";

/** `v1:<ephemeral pub>:<nonce>:<ciphertext‖tag>`. Throws on a malformed recipient key or option: the caller's bug. */
export function seal(
  plaintext: Uint8Array,
  recipientSealingPublicB64: string,
  opts: SealOptions = {},
): string {
  const recipientRaw = rawKeyFromB64(recipientSealingPublicB64);
  if (!recipientRaw) throw new Error("the recipient sealing key is not standard base64 of 32 bytes");
  const nonce = Buffer.from(opts.nonce ?? randomBytes(NONCE_BYTES));
  if (nonce.byteLength !== NONCE_BYTES) throw new Error(`the nonce must be ${NONCE_BYTES} bytes`);
  const ephemeralRaw = opts.ephemeralPrivate ?? randomBytes(KEY_BYTES);
  if (ephemeralRaw.byteLength !== KEY_BYTES) throw new Error(`the ephemeral key must be ${KEY_BYTES} bytes`);
  const ephemeral = keyPairFromRaw("x25519", ephemeralRaw);
  const ephemeralPublic = rawPublicOf(ephemeral.publicKey);
  const shared = diffieHellman({
    privateKey: ephemeral.privateKey,
    publicKey: publicKeyFromRaw("x25519", recipientRaw),
  });
  const cipher = createCipheriv("aes-256-gcm", sealKey(shared, ephemeralPublic, recipientRaw), nonce);
  const sealed = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return [SEAL_VERSION, ...[ephemeralPublic, nonce, sealed].map((b) => b.toString("base64"))].join(":");
}

/** The plaintext of a value sealed to `sealingPrivate` (the node's X25519 sealing key), or why not. */
export function unseal(value: string, sealingPrivate: KeyObject): Unsealed {
  const parts = parseSealed(value);
  if (!parts.ok) return parts;
  if (sealingPrivate.type !== "private" || sealingPrivate.asymmetricKeyType !== "x25519")
    return { ok: false, reason: "the sealing key is not an X25519 private key" };
  let shared: Buffer;
  try {
    shared = diffieHellman({
      privateKey: sealingPrivate,
      publicKey: publicKeyFromRaw("x25519", parts.ephemeral),
    });
  } catch {
    // a low-order ephemeral point makes the derivation fail: a forged value, said like any other
    return { ok: false, reason: REFUSED };
  }
  const recipient = rawPublicOf(createPublicKey(sealingPrivate));
  const decipher = createDecipheriv("aes-256-gcm", sealKey(shared, parts.ephemeral, recipient), parts.nonce, {
    authTagLength: TAG_BYTES,
  });
  decipher.setAuthTag(parts.tag);
  try {
    return { ok: true, bytes: Buffer.concat([decipher.update(parts.ciphertext), decipher.final()]) };
  } catch {
    return { ok: false, reason: REFUSED };
  }
}

/** HKDF-SHA256(shared, salt = ephemeral public ‖ recipient public, info = "mesh seal v1"), 32 bytes. */
function sealKey(shared: Uint8Array, ephemeralPublic: Uint8Array, recipientPublic: Uint8Array): Buffer {
  return Buffer.from(
    hkdfSync("sha256", shared, Buffer.concat([ephemeralPublic, recipientPublic]), SEAL_INFO, KEY_BYTES),
  );
}

type SealedParts =
  | { ok: true; ephemeral: Buffer; nonce: Buffer; ciphertext: Buffer; tag: Buffer }
  | { ok: false; reason: string };

// Each reason says which part is wrong and never echoes it.
function parseSealed(value: string): SealedParts {
  const malformed = (why: string): SealedParts => ({ ok: false, reason: `malformed sealed value: ${why}` });
  if (typeof value !== "string") return malformed("not a string");
  const parts = value.split(":");
  if (parts.length !== 4) return malformed("expected v1:<ephemeral key>:<nonce>:<ciphertext>");
  const [version, ephemeralB64, nonceB64, sealedB64] = parts as [string, string, string, string];
  if (version !== SEAL_VERSION) return malformed(`the version is not ${SEAL_VERSION}`);
  const ephemeral = rawKeyFromB64(ephemeralB64);
  if (!ephemeral) return malformed("the ephemeral key is not standard base64 of 32 bytes");
  const nonce = strictB64(nonceB64);
  if (!nonce || nonce.byteLength !== NONCE_BYTES)
    return malformed(`the nonce is not standard base64 of ${NONCE_BYTES} bytes`);
  const sealed = strictB64(sealedB64);
  if (!sealed || sealed.byteLength < TAG_BYTES)
    return malformed(`the ciphertext is not standard base64 of at least ${TAG_BYTES} bytes (its tag)`);
  const cut = sealed.byteLength - TAG_BYTES;
  return { ok: true, ephemeral, nonce, ciphertext: sealed.subarray(0, cut), tag: sealed.subarray(cut) };
}

/** Standard padded base64 with one spelling per value (Node's decoder alone skips junk silently). */
function strictB64(text: string): Buffer | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const bytes = Buffer.from(text, "base64");
  return bytes.toString("base64") === text ? bytes : null;
}
