// NATS nkeys (protocol.md "Authentication"): an Ed25519 key spelled as RFC 4648 base32 (no padding) of a prefix
// byte, the raw 32 bytes and a CRC-16/XMODEM of both, little-endian. A public key's first letter says its role
// (O operator, A account, U user); a seed (`S` + the role's letter) is the private half. Both halves of the
// bus speak them: the mesh issues a node a user whose nkey is the node's own identity public key, and the node
// signs the server's nonce with the identity private key it already keeps. Made here with Node's crypto.
import type { KeyObject } from "node:crypto";
import { type KeyPair, keyPairFromRaw, rawPublicOf } from "./raw-keys.ts";

/** The prefix byte of each role (nkeys' own table): the letter base32 spells from its top five bits. */
export const NKEY_ROLES = { operator: 14 << 3, account: 0, user: 20 << 3 } as const;
export type NkeyRole = keyof typeof NKEY_ROLES;
const SEED_PREFIX = 18 << 3;
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

export function base32(bytes: Uint8Array): string {
  let out = "";
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

function unbase32(text: string): Buffer | null {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const c of text) {
    const i = ALPHABET.indexOf(c);
    if (i < 0) return null;
    value = ((value << 5) | i) & 0xffff;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

function withCrc(body: Buffer): string {
  const crc = Buffer.alloc(2);
  crc.writeUInt16LE(crc16(body));
  return base32(Buffer.concat([body, crc]));
}

/** The public nkey of a role for 32 raw Ed25519 public bytes. */
export function publicNkey(role: NkeyRole, rawPublic: Uint8Array): string {
  return withCrc(Buffer.concat([Buffer.of(NKEY_ROLES[role]), rawPublic]));
}

/** The seed spelling of 32 raw Ed25519 private bytes: a secret, kept only in 0600 files or a code. */
export function seedNkey(role: NkeyRole, rawPrivate: Uint8Array): string {
  const p = NKEY_ROLES[role];
  const head = Buffer.of(SEED_PREFIX | (p >> 5), (p & 31) << 3);
  return withCrc(Buffer.concat([head, rawPrivate]));
}

/** The body of an nkey whose checksum holds, or null. */
function checked(text: string): Buffer | null {
  const bytes = unbase32(text);
  if (!bytes || bytes.length < 3) return null;
  const body = bytes.subarray(0, bytes.length - 2);
  return bytes.readUInt16LE(bytes.length - 2) === crc16(body) ? body : null;
}

/** The Ed25519 pair a seed of `role` spells, or null when it is not one. */
export function keyPairOfSeed(role: NkeyRole, seed: string): KeyPair | null {
  const body = checked(seed);
  if (body?.length !== 34) return null;
  const p = NKEY_ROLES[role];
  if (body[0] !== (SEED_PREFIX | (p >> 5)) || body[1] !== (p & 31) << 3) return null;
  return keyPairFromRaw("ed25519", body.subarray(2));
}

/** The public nkey of a key (private or public). */
export function nkeyOf(role: NkeyRole, key: KeyObject): string {
  return publicNkey(role, rawPublicOf(key));
}

/** The seed of a private key. */
export function seedOf(role: NkeyRole, privateKey: KeyObject): string {
  const d = privateKey.export({ format: "jwk" }).d;
  if (!d) throw new Error("a seed is made of a private key");
  return seedNkey(role, Buffer.from(d, "base64url"));
}
