// The node's three key pairs (protocol.md): made once before enrolment, reused ever after, never printed.
//
// Key file format: one line, the standard base64 (padded) of the raw 32-byte private key, then "\n" —
// exactly what `wg genkey` prints, so overlay.key is a WireGuard private key as it stands, and all three
// files read the same way. The public half is never stored: it is derived from the private one.

import { generateKeyPairSync, type KeyObject, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SECRET_FILE_MODE, STATE_DIR_MODE } from "../defaults.ts";
import { writeFileAtomicSync } from "../durable/index.ts";
import {
  type KeyKind,
  type KeyPair,
  keyPairFromRaw,
  rawKeyFromB64,
  rawPublicOf,
} from "../vocabulary/index.ts";

export interface NodeKeys {
  /** Ed25519: signs what the node says of itself (reports, heartbeats, a rekey); declarations name its public half. */
  identity: KeyPair;
  /** X25519: the mesh seals secrets to it. */
  sealing: KeyPair;
  /** X25519 with WireGuard's clamping: the overlay's private key. */
  overlay: KeyPair;
}

export type KeyName = keyof NodeKeys;

/** Each public key as standard base64 of its raw 32 bytes, as the enrolment question carries them. */
export interface PublicKeys {
  identity: string;
  sealing: string;
  overlay: string;
}

export type KeysResult = { ok: true; keys: NodeKeys } | { ok: false; reason: string };
export type EnsuredKeys = { ok: true; keys: NodeKeys; made: KeyName[] } | { ok: false; reason: string };

export const KEY_DIR = "identity";
export const KEY_NAMES: readonly KeyName[] = ["identity", "sealing", "overlay"];
const KEY_KINDS: Record<KeyName, KeyKind> = { identity: "ed25519", sealing: "x25519", overlay: "x25519" };

export function makeKeys(): NodeKeys {
  return { identity: makeKeyPair("ed25519"), sealing: makeKeyPair("x25519"), overlay: makeOverlayKey() };
}

export function makeKeyPair(kind: KeyKind): KeyPair {
  const { privateKey, publicKey } =
    kind === "ed25519" ? generateKeyPairSync("ed25519") : generateKeyPairSync("x25519");
  return { privateKey, publicKey };
}

/** WireGuard's convention (`wg genkey`): 32 random bytes, clamped; the public half is X25519 of it. */
export function makeOverlayKey(): KeyPair {
  const raw = randomBytes(32);
  raw[0] = raw[0]! & 248;
  raw[31] = (raw[31]! & 127) | 64;
  return keyPairFromRaw("x25519", raw);
}

/** A WireGuard private key as `wg` writes it (the overlay key taken from a found tunnel), or null. */
export function overlayKeyFromB64(text: string): KeyPair | null {
  const raw = rawKeyFromB64(text.trim());
  return raw ? keyPairFromRaw("x25519", raw) : null;
}

export function publicB64(key: KeyObject): string {
  return rawPublicOf(key).toString("base64");
}

/** The private key's raw bytes in base64: only for writing it where it must be (its key file, WireGuard's config). */
export function privateB64(key: KeyObject): string {
  return Buffer.from(key.export({ format: "jwk" }).d ?? "", "base64url").toString("base64");
}

export function publicKeys(keys: NodeKeys): PublicKeys {
  return {
    identity: publicB64(keys.identity.publicKey),
    sealing: publicB64(keys.sealing.publicKey),
    overlay: publicB64(keys.overlay.publicKey),
  };
}

export function keyPath(stateDir: string, name: KeyName): string {
  return join(stateDir, KEY_DIR, `${name}.key`);
}

/** Write all three key files (0600) under `identity/` (0700), each atomically. Throws on a file-system error. */
export function saveKeys(stateDir: string, keys: NodeKeys): void {
  for (const name of KEY_NAMES) saveKey(stateDir, name, keys[name]);
}

export function saveKey(stateDir: string, name: KeyName, pair: KeyPair): void {
  ensureKeyDir(stateDir);
  writeFileAtomicSync(keyPath(stateDir, name), `${privateB64(pair.privateKey)}\n`, SECRET_FILE_MODE);
}

export function loadKeys(stateDir: string): KeysResult {
  const pairs: Partial<NodeKeys> = {};
  for (const name of KEY_NAMES) {
    const loaded = loadKey(stateDir, name);
    if (!loaded.ok) return loaded;
    pairs[name] = loaded.pair;
  }
  return { ok: true, keys: pairs as NodeKeys };
}

/**
 * The node's keys, made only where none is on disk. An existing key is never replaced, even an unreadable
 * one: the mesh may already know it, so a broken file is refused for a person to look at, not papered over.
 */
export function ensureKeys(stateDir: string): EnsuredKeys {
  const pairs: Partial<NodeKeys> = {};
  const made: KeyName[] = [];
  for (const name of KEY_NAMES) {
    if (existsSync(keyPath(stateDir, name))) {
      const loaded = loadKey(stateDir, name);
      if (!loaded.ok) return loaded;
      pairs[name] = loaded.pair;
    } else {
      pairs[name] = name === "overlay" ? makeOverlayKey() : makeKeyPair(KEY_KINDS[name]);
      made.push(name);
    }
  }
  for (const name of made) {
    try {
      saveKey(stateDir, name, pairs[name]!);
    } catch (e) {
      return {
        ok: false,
        reason: `cannot write ${keyPath(stateDir, name)}: ${(e as NodeJS.ErrnoException).code ?? "error"}`,
      };
    }
  }
  return { ok: true, keys: pairs as NodeKeys, made };
}

export type LoadedKey = { ok: true; pair: KeyPair } | { ok: false; reason: string };

/**
 * The identity key alone: what the node signs its reports, heartbeats and rekeys with, and whose public half a
 * declaration must be addressed to. Its file is never made here: a missing one is the node's to explain.
 */
export function loadIdentity(stateDir: string): LoadedKey {
  return loadKey(stateDir, "identity");
}

// A reason names the file and never quotes its content: the content is the secret.
function loadKey(stateDir: string, name: KeyName): LoadedKey {
  const path = keyPath(stateDir, name);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return {
      ok: false,
      reason: code === "ENOENT" ? `${path} is missing` : `cannot read ${path}: ${code ?? "error"}`,
    };
  }
  const raw = rawKeyFromB64(text.replace(/\r?\n$/, ""));
  if (!raw)
    return { ok: false, reason: `${path} is not a key file (one line: base64 of a 32-byte private key)` };
  return { ok: true, pair: keyPairFromRaw(KEY_KINDS[name], raw) };
}

// The state directory is made 0700 only when absent (never narrowed or widened behind the owner's back);
// identity/ is ours alone, so it is always set to 0700.
function ensureKeyDir(stateDir: string): void {
  if (!existsSync(stateDir)) {
    mkdirSync(stateDir, { recursive: true, mode: STATE_DIR_MODE });
    chmodSync(stateDir, STATE_DIR_MODE);
  }
  const dir = join(stateDir, KEY_DIR);
  if (!existsSync(dir)) mkdirSync(dir, { mode: STATE_DIR_MODE });
  chmodSync(dir, STATE_DIR_MODE);
}
