import { diffieHellman, sign, verify } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  ensureKeys,
  KEY_NAMES,
  keyPath,
  loadKeys,
  makeKeys,
  makeOverlayKey,
  type NodeKeys,
  overlayKeyFromB64,
  privateB64,
  publicKeys,
  saveKeys,
} from "../../src/store/keys.ts";
import { keyPairFromRaw } from "../../src/vocabulary/index.ts";

const B64_KEY = /^[A-Za-z0-9+/]{43}=$/;

let dir: string;
beforeEach(() => {
  dir = join(mkdtempSync(join(tmpdir(), "mesh-keys-")), "state");
});
afterEach(() => {
  rmSync(join(dir, ".."), { recursive: true, force: true });
});

function privatesOf(keys: NodeKeys): string[] {
  return KEY_NAMES.map((name) => privateB64(keys[name].privateKey));
}

function fileContents(): string[] {
  return KEY_NAMES.map((name) => readFileSync(keyPath(dir, name), "utf8"));
}

describe("makeKeys", () => {
  it("makes an Ed25519 identity and X25519 sealing and overlay keys, public keys as base64 of 32 bytes", () => {
    const keys = makeKeys();
    expect(keys.identity.privateKey.asymmetricKeyType).toBe("ed25519");
    expect(keys.sealing.privateKey.asymmetricKeyType).toBe("x25519");
    expect(keys.overlay.privateKey.asymmetricKeyType).toBe("x25519");
    const pub = publicKeys(keys);
    for (const name of KEY_NAMES) expect(pub[name]).toMatch(B64_KEY);
    expect(new Set(Object.values(pub)).size).toBe(3);
  });

  it("makes the overlay key as wg genkey does: 32 random bytes, clamped", () => {
    for (let i = 0; i < 20; i++) {
      const raw = Buffer.from(privateB64(makeOverlayKey().privateKey), "base64");
      expect(raw.byteLength).toBe(32);
      expect(raw[0]! & 7).toBe(0);
      expect(raw[31]! & 128).toBe(0);
      expect(raw[31]! & 64).toBe(64);
    }
  });

  it("derives the overlay public key as X25519 of the private key (RFC 7748 §6.1)", () => {
    const alice = Buffer.from("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", "hex");
    const pair = overlayKeyFromB64(`${alice.toString("base64")}\n`)!;
    const pub = publicKeys({ identity: makeKeys().identity, sealing: pair, overlay: pair }).overlay;
    expect(Buffer.from(pub, "base64").toString("hex")).toBe(
      "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
    );
  });

  it("refuses a WireGuard key that is not base64 of 32 bytes", () => {
    expect(overlayKeyFromB64("not a key")).toBeNull();
    expect(overlayKeyFromB64(Buffer.alloc(31).toString("base64"))).toBeNull();
  });

  it("never shows a private key when the keys are inspected or stringified", () => {
    const keys = makeKeys();
    const shown = inspect(keys, { depth: 10 }) + JSON.stringify(keys) + String(keys.identity.privateKey);
    for (const secret of privatesOf(keys)) {
      expect(shown).not.toContain(secret);
      expect(shown).not.toContain(Buffer.from(secret, "base64").toString("hex"));
    }
  });
});

describe("saveKeys and loadKeys", () => {
  it("writes one line of base64 per key, files 0600 in a 0700 directory, and reads the same keys back", () => {
    const keys = makeKeys();
    saveKeys(dir, keys);
    expect(statSync(join(dir, "identity")).mode & 0o777).toBe(0o700);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    for (const name of KEY_NAMES) {
      expect(statSync(keyPath(dir, name)).mode & 0o777).toBe(0o600);
      expect(readFileSync(keyPath(dir, name), "utf8")).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
    }
    expect(readdirSync(join(dir, "identity")).sort()).toEqual(["identity.key", "overlay.key", "sealing.key"]);
    const loaded = loadKeys(dir);
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(publicKeys(loaded.keys)).toEqual(publicKeys(keys));
    expect(privatesOf(loaded.keys)).toEqual(privatesOf(keys));
  });

  it("loads keys that still do their work: the identity signs, the sealing key agrees", () => {
    saveKeys(dir, makeKeys());
    const loaded = loadKeys(dir);
    if (!loaded.ok) throw new Error(loaded.reason);
    const message = Buffer.from("rekey");
    expect(
      verify(
        null,
        message,
        loaded.keys.identity.publicKey,
        sign(null, message, loaded.keys.identity.privateKey),
      ),
    ).toBe(true);
    const other = makeKeys().sealing;
    expect(diffieHellman({ privateKey: loaded.keys.sealing.privateKey, publicKey: other.publicKey })).toEqual(
      diffieHellman({ privateKey: other.privateKey, publicKey: loaded.keys.sealing.publicKey }),
    );
  });

  it("says which key file is missing", () => {
    const loaded = loadKeys(dir);
    expect(loaded).toEqual({ ok: false, reason: `${keyPath(dir, "identity")} is missing` });
  });

  it("refuses a malformed key file naming the file, never quoting it", () => {
    saveKeys(dir, makeKeys());
    const junk = "c2VjcmV0LWJ1dC1ub3QtYS1rZXk=";
    writeFileSync(keyPath(dir, "sealing"), `${junk}\n`);
    const loaded = loadKeys(dir);
    expect(loaded.ok).toBe(false);
    if (loaded.ok) return;
    expect(loaded.reason).toContain(keyPath(dir, "sealing"));
    expect(loaded.reason).not.toContain(junk);
    expect(loaded.reason).not.toContain("\n");
  });

  it("reads a key file written without its final newline", () => {
    const keys = makeKeys();
    saveKeys(dir, keys);
    writeFileSync(keyPath(dir, "overlay"), privateB64(keys.overlay.privateKey));
    const loaded = loadKeys(dir);
    expect(loaded.ok && publicKeys(loaded.keys).overlay).toBe(publicKeys(keys).overlay);
  });
});

describe("ensureKeys", () => {
  it("makes the keys once and reuses them ever after, never rewriting a file", () => {
    const first = ensureKeys(dir);
    expect(first.ok && first.made).toEqual(["identity", "sealing", "overlay"]);
    const written = fileContents();
    const second = ensureKeys(dir);
    expect(second.ok && second.made).toEqual([]);
    if (!first.ok || !second.ok) return;
    expect(publicKeys(second.keys)).toEqual(publicKeys(first.keys));
    expect(fileContents()).toEqual(written);
  });

  it("makes only a missing key and leaves the others as they are", () => {
    const first = ensureKeys(dir);
    if (!first.ok) throw new Error(first.reason);
    unlinkSync(keyPath(dir, "overlay"));
    const second = ensureKeys(dir);
    if (!second.ok) throw new Error(second.reason);
    expect(second.made).toEqual(["overlay"]);
    expect(publicKeys(second.keys).identity).toBe(publicKeys(first.keys).identity);
    expect(publicKeys(second.keys).sealing).toBe(publicKeys(first.keys).sealing);
    expect(publicKeys(second.keys).overlay).not.toBe(publicKeys(first.keys).overlay);
  });

  it("refuses rather than replaces a key file it cannot read", () => {
    ensureKeys(dir);
    writeFileSync(keyPath(dir, "identity"), "garbage\n");
    const again = ensureKeys(dir);
    expect(again.ok).toBe(false);
    expect(readFileSync(keyPath(dir, "identity"), "utf8")).toBe("garbage\n");
  });

  it("leaves no temporary files behind", () => {
    ensureKeys(dir);
    expect(readdirSync(join(dir, "identity")).filter((n) => n.startsWith("."))).toEqual([]);
  });

  it("keeps a taken-over WireGuard key exactly as found (unclamped bytes included)", () => {
    const raw = Buffer.alloc(32, 0xff);
    saveKeys(dir, { ...makeKeys(), overlay: keyPairFromRaw("x25519", raw) });
    const loaded = ensureKeys(dir);
    expect(loaded.ok && privateB64(loaded.keys.overlay.privateKey)).toBe(raw.toString("base64"));
  });
});
