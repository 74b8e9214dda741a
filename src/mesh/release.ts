// The mesh's releases (protocol.md "Releases"): an executable or an Arch package stored compressed in the object
// store bucket `mesh-releases` (stream OBJ_mesh-releases, direct gets allowed: the one way a node reads it), its
// manifest signed by the mesh key in the object's description. Written as NATS object stores write (chunks under
// $O.<bucket>.C.<nuid>, the meta rolled up under $O.<bucket>.M.<name>), so the `nats` tool reads it too.
import { createHash, type KeyObject, randomBytes } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { basename } from "node:path";
import { promisify } from "node:util";
import * as zlib from "node:zlib";
import { DiscardPolicy, StorageType } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { RELEASE_CHUNK_BYTES, RELEASE_PUBLISH_WINDOW } from "../defaults.ts";
import {
  manifestOf,
  ObjectMeta,
  RELEASE_BUCKET,
  RELEASE_STREAM,
  RELEASE_SUBJECTS,
  type ReleaseArch,
  type ReleaseEncoding,
  type ReleaseKind,
  type ReleaseManifest,
  ReleaseVersion,
  releaseChunkSubject,
  releaseMetaSubject,
  releaseObjectName,
  signManifest,
} from "../vocabulary/index.ts";
import { type Bus, connectBus, jsCall } from "./bus.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";

export interface ReleaseInput {
  file: string;
  version?: string;
  kind?: ReleaseKind;
}

/** A release as `ls` shows it: the manifest (null when the object carries none) and how much the bus keeps. */
export interface ReleaseRow {
  name: string;
  manifest: ReleaseManifest | null;
  stored: number;
}

const ELF = Buffer.from([0x7f, 0x45, 0x4c, 0x46]);
const ZSTD = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
/** ELF e_machine: x86-64 and AArch64. */
const ELF_MACHINES: Record<number, ReleaseArch> = { 62: "x64", 183: "arm64" };
const PACKAGE_ARCHES: Record<string, ReleaseArch> = { x86_64: "x64", aarch64: "arm64" };

/** The file's bytes and what they are: an executable (ELF) or an Arch package; anything else is refused. */
function inspect(input: ReleaseInput): {
  bytes: Buffer;
  kind: ReleaseKind;
  arch: ReleaseArch;
  version: string;
} {
  const name = basename(input.file);
  let bytes: Buffer;
  try {
    if (!statSync(input.file).isFile()) throw new MeshRefused(`${input.file} is not a file`);
    bytes = readFileSync(input.file);
  } catch (e) {
    if (e instanceof MeshRefused) throw e;
    throw new MeshRefused(`${input.file} cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`);
  }
  const pkg = /^mesh-host-(.+)-[0-9]+-(x86_64|aarch64)\.pkg\.tar\.zst$/.exec(name);
  if (pkg || input.kind === "arch") {
    if (!pkg || !bytes.subarray(0, 4).equals(ZSTD))
      throw new MeshRefused(
        `${name} is not an Arch package of mesh-host (mesh-host-VERSION-REL-ARCH.pkg.tar.zst, zstd)`,
      );
    if (input.kind && input.kind !== "arch")
      throw new MeshRefused(`${name} is an Arch package, not ${input.kind}`);
    return { bytes, kind: "arch", arch: PACKAGE_ARCHES[pkg[2]!]!, version: input.version ?? pkg[1]! };
  }
  if (!bytes.subarray(0, 4).equals(ELF))
    throw new MeshRefused(`${name} is neither an executable (ELF) nor an Arch package`);
  const arch = bytes.length > 20 ? ELF_MACHINES[bytes.readUInt16LE(18)] : undefined;
  if (!arch) throw new MeshRefused(`${name} is an executable for neither x64 nor arm64`);
  const version = input.version ?? /^mesh-host-(.+)-linux-(x64|arm64)$/.exec(name)?.[1];
  if (!version) throw new MeshRefused(`${name} does not say its version: give it with --version V`);
  return { bytes, kind: input.kind ?? "linux", arch, version };
}

type Compress = (b: Buffer) => Promise<Buffer>;

/** zstd where this runtime has it (Node >= 22.15 and the executable's 24), else gzip, which every Node has. */
function compressor(): { encoding: ReleaseEncoding; compress: Compress } {
  const z = zlib as unknown as Record<string, unknown>;
  if (typeof z.zstdCompress === "function")
    return {
      encoding: "zstd",
      compress: promisify(z.zstdCompress as (b: Buffer, cb: never) => void) as Compress,
    };
  return { encoding: "gzip", compress: (b) => promisify(zlib.gzip)(b) };
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest();

/** OBJ_mesh-releases as an object store's stream, with direct gets: made once, or brought to this configuration. */
async function ensureReleaseStream(bus: Bus, replicas: number): Promise<void> {
  const config = {
    name: RELEASE_STREAM,
    subjects: RELEASE_SUBJECTS,
    storage: StorageType.File,
    num_replicas: replicas,
    discard: DiscardPolicy.New,
    allow_rollup_hdrs: true,
    allow_direct: true,
  };
  const exists = await bus.jsm.streams.info(RELEASE_STREAM).then(
    () => true,
    () => false,
  );
  await jsCall(() => (exists ? bus.jsm.streams.update(RELEASE_STREAM, config) : bus.jsm.streams.add(config)));
}

/** The object's meta as it stands, or null when there is none (or it was deleted). */
async function metaOf(bus: Bus, name: string): Promise<ObjectMeta | null> {
  const m = await bus.jsm.streams
    .getMessage(RELEASE_STREAM, { last_by_subj: releaseMetaSubject(name) })
    .catch(() => null);
  const meta = m ? ObjectMeta.safeParse(m.json()) : null;
  return meta?.success && !meta.data.deleted ? meta.data : null;
}

/** Store FILE as a release of the mesh in `mesh`'s directory (its key signs, its servers replicate). */
export async function addRelease(mesh: MeshDir, input: ReleaseInput): Promise<ReleaseManifest> {
  const key = mesh.signingKey();
  const replicas = mesh.config().servers.length;
  const bus = await connectBus(mesh);
  try {
    return await storeRelease(bus, key, replicas, input);
  } finally {
    await bus.close();
  }
}

/** FILE as a release on `bus`: compressed, chunked, its manifest signed by `key` in the meta. Refused if there already. */
export async function storeRelease(
  bus: Bus,
  key: KeyObject,
  replicas: number,
  input: ReleaseInput,
): Promise<ReleaseManifest> {
  const file = inspect(input);
  const version = ReleaseVersion.safeParse(file.version);
  if (!version.success)
    throw new MeshRefused(`--version "${file.version}" ${version.error.issues[0]!.message}`);
  const name = releaseObjectName(version.data, file.kind, file.arch);
  await ensureReleaseStream(bus, replicas);
  if (await metaOf(bus, name))
    throw new MeshRefused(`release ${name} is stored already: \`mesh release rm ${version.data}\` first`);
  const { encoding, compress } = compressor();
  const stored = await compress(file.bytes);
  const manifest: ReleaseManifest = {
    v: 1,
    version: version.data,
    kind: file.kind,
    arch: file.arch,
    sha256: sha256(file.bytes).toString("hex"),
    size: file.bytes.length,
    encoding,
    stored: { sha256: sha256(stored).toString("hex"), size: stored.length },
    file: basename(input.file).slice(0, 255),
    added_at: new Date().toISOString(),
  };
  const nuid = randomBytes(16).toString("hex");
  const chunks = await putChunks(bus, nuid, stored);
  const meta = {
    name,
    description: signManifest(manifest, key),
    bucket: RELEASE_BUCKET,
    nuid,
    size: stored.length,
    chunks,
    mtime: manifest.added_at,
    digest: `SHA-256=${sha256(stored).toString("base64url")}=`,
    options: { max_chunk_size: RELEASE_CHUNK_BYTES },
  };
  const h = headers();
  h.set("Nats-Rollup", "sub");
  await bus.js.publish(releaseMetaSubject(name), JSON.stringify(meta), { headers: h });
  return manifest;
}

/** The chunks, a window of them in flight at a time; how many. */
async function putChunks(bus: Bus, nuid: string, stored: Buffer): Promise<number> {
  const subject = releaseChunkSubject(nuid);
  const count = Math.ceil(stored.length / RELEASE_CHUNK_BYTES);
  for (let first = 0; first < count; first += RELEASE_PUBLISH_WINDOW) {
    const window: Promise<unknown>[] = [];
    for (let i = first; i < Math.min(count, first + RELEASE_PUBLISH_WINDOW); i++)
      window.push(
        bus.js.publish(subject, stored.subarray(i * RELEASE_CHUNK_BYTES, (i + 1) * RELEASE_CHUNK_BYTES)),
      );
    await Promise.all(window);
  }
  return count;
}

/** Every release stored, by name. */
export async function listReleases(mesh: MeshDir): Promise<ReleaseRow[]> {
  const bus = await connectBus(mesh);
  try {
    const info = await bus.jsm.streams
      .info(RELEASE_STREAM, { subjects_filter: RELEASE_SUBJECTS[1] })
      .catch(() => null);
    const rows: ReleaseRow[] = [];
    for (const subject of Object.keys(info?.state.subjects ?? {}).sort()) {
      const m = await bus.jsm.streams.getMessage(RELEASE_STREAM, { last_by_subj: subject }).catch(() => null);
      const meta = m ? ObjectMeta.safeParse(m.json()) : null;
      if (!meta?.success || meta.data.deleted) continue;
      rows.push({
        name: meta.data.name,
        manifest: manifestOf(meta.data.description),
        stored: meta.data.size,
      });
    }
    return rows;
  } finally {
    await bus.close();
  }
}

/** Every object of release VERSION (each kind and processor) goes: its chunks, then its meta. */
export async function removeRelease(mesh: MeshDir, version: string): Promise<string[]> {
  const parsed = ReleaseVersion.safeParse(version);
  if (!parsed.success) throw new MeshRefused(`release "${version}" ${parsed.error.issues[0]!.message}`);
  const names = (await listReleases(mesh)).filter((r) => r.name.startsWith(`${version}/`)).map((r) => r.name);
  if (!names.length) throw new MeshRefused(`no release ${version} is stored (see \`mesh release ls\`)`);
  const bus = await connectBus(mesh);
  try {
    for (const name of names) {
      const meta = await metaOf(bus, name);
      if (meta) await bus.jsm.streams.purge(RELEASE_STREAM, { filter: releaseChunkSubject(meta.nuid) });
      await bus.jsm.streams.purge(RELEASE_STREAM, { filter: releaseMetaSubject(name) });
    }
    return names;
  } finally {
    await bus.close();
  }
}
