// The declaration message (protocol.md): {v:1, body, sig}, the body a JSON string signed by the mesh key.
// Checked in order — the message's size, encoding and JSON; its shape; the signature; the body's schema; the
// node — so nothing unsigned is ever parsed as a declaration, and each refusal is one line naming its field. Pure (no nats):
// the mesh side (src/mesh/) signs with it and the host verifies with it.
import { createPublicKey, generateKeyPairSync, type KeyObject, sign, verify } from "node:crypto";
import { MAX_BODY_BYTES, MAX_ENVELOPE_BYTES } from "../defaults.ts";
import {
  ALL_TYPES,
  type Declaration,
  digestOf,
  parseDeclarationBody,
  type TypeSupport,
} from "./declaration.ts";
import { parseJsonBytes, tooBig } from "./json.ts";
import { type Refusal, refusalsFromIssues } from "./refusal.ts";
import { Envelope } from "./wire.ts";

/** The DER header of an Ed25519 SubjectPublicKeyInfo; the raw 32 bytes follow it. */
export const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

export interface VerifyOptions {
  /** The mesh's Ed25519 public key, standard base64 of its raw 32 bytes (the membership's `mesh_key`). */
  meshKey: string;
  /** This node's name. */
  node: string;
  /**
   * This node's identity public key (standard base64), when the body must be addressed to it: a delivery over the
   * link. Absent for what was judged on arrival already (the kept declaration applied again).
   */
  identity?: string;
  support?: TypeSupport;
}

/**
 * A verified envelope, or why not. Either way `digest` is what a report names: the SHA-256 of the body when the
 * message has one, else of the bytes. The envelope itself comes back too, so nobody parses the bytes again.
 */
export type Verified =
  | { ok: true; declaration: Declaration; body: string; digest: string; envelope: Envelope }
  | { ok: false; refusals: Refusal[]; digest: string };

export type MeshPublicKey = { ok: true; key: KeyObject } | { ok: false; reason: string };

export function ed25519PublicFromB64(b64: string): MeshPublicKey {
  const raw = typeof b64 === "string" && /^[A-Za-z0-9+/]{43}=$/.test(b64) ? Buffer.from(b64, "base64") : null;
  if (!raw || raw.toString("base64") !== b64)
    return { ok: false, reason: "is not an Ed25519 public key (standard base64 of 32 bytes)" };
  try {
    return {
      ok: true,
      key: createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: "der", type: "spki" }),
    };
  } catch {
    return { ok: false, reason: "is not an Ed25519 public key" };
  }
}

/** A mesh key pair, for tests and the mesh double: the host itself never holds the mesh's private key. */
export function makeMeshKey(): { privateKey: KeyObject; publicB64: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(ED25519_SPKI_PREFIX.byteLength);
  return { privateKey, publicB64: raw.toString("base64") };
}

/** The mesh's side: sign the body's UTF-8 bytes. */
export function signEnvelope(body: string, meshPrivateKey: KeyObject): Envelope {
  return { v: 1, body, sig: sign(null, Buffer.from(body, "utf8"), meshPrivateKey).toString("base64") };
}

export function verifyEnvelope(bytes: Uint8Array, opts: VerifyOptions): Verified {
  const json = parseJsonBytes(bytes, MAX_ENVELOPE_BYTES);
  if (!json.ok) return refused(digestOf(bytes), "", `the message ${json.reason}`);
  const digest = digestNamed(json.value, bytes);
  const envelope = Envelope.safeParse(json.value);
  if (!envelope.success)
    return { ok: false, refusals: refusalsFromIssues("declaration", envelope.error.issues), digest };
  const { body, sig } = envelope.data;
  // refused by its size before it is copied, checked for lone surrogates and hashed (the body check's words)
  const size = Buffer.byteLength(body, "utf8");
  if (size > MAX_BODY_BYTES) return refused(digest, "", `the body is ${tooBig(size, MAX_BODY_BYTES)}`);
  const bodyBytes = Buffer.from(body, "utf8");
  // a lone surrogate becomes U+FFFD in UTF-8, so two different bodies would share one signature
  if (bodyBytes.toString("utf8") !== body)
    return refused(digest, "body", "is not well-formed Unicode (a lone surrogate)");
  const meshKey = ed25519PublicFromB64(opts.meshKey);
  if (!meshKey.ok) return refused(digest, "mesh_key", `the membership's mesh key ${meshKey.reason}`);
  if (!signatureHolds(bodyBytes, sig, meshKey.key))
    return refused(digest, "sig", "signature does not verify against the mesh key");
  const parsed = parseDeclarationBody(bodyBytes, opts.support ?? ALL_TYPES);
  if (!parsed.ok) return { ...parsed, digest };
  const declaration = parsed.value;
  if (declaration.node !== opts.node)
    return refused(digest, "node", `is for node ${declaration.node}, not this node ${opts.node}`);
  const misaddressed = opts.identity === undefined ? null : addressProblem(declaration.to, opts.identity);
  if (misaddressed) return refused(digest, "to", misaddressed);
  return { ok: true, declaration, body, digest, envelope: envelope.data };
}

/**
 * Why a body is not addressed to this node's identity key, or null. No `to` is refused too: a mesh that signs
 * without it signs for the name, and a name's earlier enrolment (or a v1 mesh's captured envelope) would apply.
 */
function addressProblem(to: string | undefined, identity: string): string | null {
  if (to === undefined)
    return "is required of a declaration from the mesh: it names the identity key the declaration is for";
  if (to === identity) return null;
  return `is addressed to identity key ${to.slice(0, 12)}…, not this node's ${identity.slice(0, 12)}…: signed for an earlier enrolment of this name, or for another node`;
}

/** The body's digest when the message carries one as a string (what a report names), else the bytes'. */
function digestNamed(json: unknown, bytes: Uint8Array): string {
  const body = (json as { body?: unknown } | null)?.body;
  return digestOf(typeof body === "string" ? body : bytes);
}

function signatureHolds(body: Uint8Array, sigB64: string, key: KeyObject): boolean {
  try {
    return verify(null, body, key, Buffer.from(sigB64, "base64"));
  } catch {
    return false;
  }
}

function refused(digest: string, field: string, reason: string): Verified {
  return { ok: false, refusals: [{ id: "declaration", field, reason }], digest };
}
