// Host releases (protocol.md "Releases"): an executable, or an Arch package, kept compressed in the mesh's
// object store bucket `mesh-releases`, with a manifest signed by the mesh key that says what the node must end up
// with. The names the two halves compose and the manifest's shape and signature live here, pure (no nats).

import type { KeyObject } from "node:crypto";
import { sign, verify } from "node:crypto";
import * as z from "zod";
import { ed25519PublicFromB64 } from "./envelope.ts";
import { parseJsonBytes } from "./json.ts";

/** A release's version as the mesh names it: `0.2.0`, `0.2.0-rc.1`, `0.2.0+build.5`. */
export const ReleaseVersion = z
  .string()
  .regex(/^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$/, "must be a version such as 0.2.0 (letters, digits, . + _ -)");

/** What the host is (src/host-kind.ts) and which processor it runs on (process.arch). */
export const ReleaseKind = z.enum(["linux", "arch", "android"]);
export type ReleaseKind = z.infer<typeof ReleaseKind>;
export const ReleaseArch = z.enum(["x64", "arm64"]);
export type ReleaseArch = z.infer<typeof ReleaseArch>;
/** How the stored bytes are compressed: zstd where the runtime has it (Node >= 22.15), else gzip. */
export const ReleaseEncoding = z.enum(["zstd", "gzip", "br"]);
export type ReleaseEncoding = z.infer<typeof ReleaseEncoding>;

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, "must be a SHA-256 (64 lower-case hex digits)");
const Size = z.number().int().min(1);

/** What the mesh signs: the file a node ends up with (digest, size), and the object it is carried in. */
export const ReleaseManifest = z.strictObject({
  v: z.literal(1),
  version: ReleaseVersion,
  kind: ReleaseKind,
  arch: ReleaseArch,
  /** The uncompressed file: what is installed. */
  sha256: Sha256,
  size: Size,
  encoding: ReleaseEncoding,
  /** The object as stored (compressed): checked before a byte of it is decompressed. */
  stored: z.strictObject({ sha256: Sha256, size: Size }),
  /** Why the operator stored it: the file's name as given. */
  file: z.string().max(255),
  added_at: z.iso.datetime(),
});
export type ReleaseManifest = z.infer<typeof ReleaseManifest>;

/** The manifest as carried in the object's description: `{v, body, sig}` like a declaration's envelope. */
const SignedManifest = z.strictObject({
  v: z.literal(1),
  body: z.string(),
  sig: z.string().regex(/^[A-Za-z0-9+/]{86}==$/, "must be standard base64 of a 64-byte signature"),
});

export const RELEASE_BUCKET = "mesh-releases";
export const RELEASE_STREAM = `OBJ_${RELEASE_BUCKET}`;
/** The one JetStream API subject a node may use for releases: direct get on the release stream, nothing else. */
export const RELEASE_DIRECT_GET = `$JS.API.DIRECT.GET.${RELEASE_STREAM}`;
export const releaseChunkSubject = (nuid: string): string => `$O.${RELEASE_BUCKET}.C.${nuid}`;
/** As NATS object stores name an object's meta subject: the name in URL-safe base64, padded. */
export const releaseMetaSubject = (name: string): string =>
  `$O.${RELEASE_BUCKET}.M.${Buffer.from(name, "utf8").toString("base64url")}${"=".repeat((3 - (Buffer.byteLength(name) % 3)) % 3)}`;
export const RELEASE_SUBJECTS = [`$O.${RELEASE_BUCKET}.C.>`, `$O.${RELEASE_BUCKET}.M.>`];
/** One object a release: its version, the host kind and the processor it is for. */
export const releaseObjectName = (version: string, kind: ReleaseKind, arch: ReleaseArch): string =>
  `${version}/${kind}/${arch}`;

/** An object's meta message as NATS object stores write it (the fields read here; others are let through). */
export const ObjectMeta = z.looseObject({
  name: z.string(),
  bucket: z.string(),
  nuid: z.string().regex(/^[A-Za-z0-9]{1,64}$/, "must be a NUID"),
  size: z.number().int().min(0),
  chunks: z.number().int().min(0),
  description: z.string().optional(),
  deleted: z.boolean().optional(),
});
export type ObjectMeta = z.infer<typeof ObjectMeta>;

/** The mesh's side: the manifest signed, as the object's description carries it. */
export function signManifest(manifest: ReleaseManifest, key: KeyObject): string {
  const body = JSON.stringify(manifest);
  const sig = sign(null, Buffer.from(body, "utf8"), key).toString("base64");
  return JSON.stringify({ v: 1, body, sig });
}

export type ManifestRead = { ok: true; manifest: ReleaseManifest } | { ok: false; reason: string };

/** The manifest a description carries, only if the mesh key signed it; why not, in one line, otherwise. */
export function verifyManifest(description: string | undefined, meshKeyB64: string): ManifestRead {
  if (!description) return { ok: false, reason: "the release carries no manifest" };
  const json = parseJsonBytes(Buffer.from(description, "utf8"));
  const signed = json.ok ? SignedManifest.safeParse(json.value) : null;
  if (!signed?.success) return { ok: false, reason: "the release's manifest is not a signed manifest" };
  const key = ed25519PublicFromB64(meshKeyB64);
  if (!key.ok) return { ok: false, reason: `the membership's mesh key ${key.reason}` };
  const body = Buffer.from(signed.data.body, "utf8");
  let holds = false;
  try {
    holds = verify(null, body, key.key, Buffer.from(signed.data.sig, "base64"));
  } catch {
    holds = false;
  }
  if (!holds) return { ok: false, reason: "the release's manifest is not signed by the mesh key" };
  const inner = parseJsonBytes(body);
  const manifest = inner.ok ? ReleaseManifest.safeParse(inner.value) : null;
  if (!manifest?.success) return { ok: false, reason: "the release's signed manifest is malformed" };
  return { ok: true, manifest: manifest.data };
}

/** The manifest a description carries, read without its signature: for the operator's own listing. */
export function manifestOf(description: string | undefined): ReleaseManifest | null {
  try {
    const outer = SignedManifest.parse(JSON.parse(description ?? ""));
    return ReleaseManifest.parse(JSON.parse(outer.body));
  } catch {
    return null;
  }
}
