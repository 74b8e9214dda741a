// The host's own release (protocol.md "Releases"): named by a verified declaration, fetched through the link by
// direct gets into the state directory (a cut fetch resumes where it stood), checked against the manifest the mesh
// signed (the stored object's digest before a byte is decompressed, the file's digest and size after), and only
// then swapped in: renamed over the installed binary (copy-and-run, Android's /data/mesh-host/bin), or
// `pacman -U` of the package on Arch. The run loop then reports and exits 0; the launcher starts the release
// unconfirmed and rolls it back after three failed starts. A SIGKILL anywhere leaves the old file or the new one
// in place, never neither: everything before the rename is beside it, and the rename is atomic.
import { createHash } from "node:crypto";
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  rmSync,
  statfsSync,
  statSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import * as zlib from "node:zlib";
import type { Logger } from "../appliers/index.ts";
import { EXECUTABLE_MODE, RELEASE_SPACE_MARGIN_BYTES, STATE_DIR_MODE } from "../defaults.ts";
import { commitTemp, sweepTempsBeside, syncFilled, tempPathFor } from "../durable/index.ts";
import type { ReleaseSource } from "../link/index.ts";
import type { State } from "../store/index.ts";
import type { Exec } from "../system/index.ts";
import {
  ReleaseArch,
  type ReleaseEncoding,
  type ReleaseKind,
  type ReleaseManifest,
  type Report,
  type ReportStep,
  releaseObjectName,
  verifyManifest,
} from "../vocabulary/index.ts";
import { type BinaryAtStart, digestOfFile } from "./binary.ts";
import { fetchStored, sweepOthers } from "./fetch.ts";

export interface UpgradeDeps {
  state: State;
  kind: ReleaseKind;
  meshKey: string;
  exec: Exec;
  /** The installed binary (the launcher's MESH_HOST_BIN): what a release replaces. */
  installed: BinaryAtStart | null;
  log: Logger;
  /** Install a package file (pacman -U on Arch): why not, or null. Only a host whose releases are packages has it. */
  installPackage?: (exec: Exec, file: string) => Promise<string | null>;
}

/** The release step as the report carries it, and whether the host now exits to be restarted onto it. */
export interface Upgraded {
  step: ReportStep;
  restart: boolean;
  /** The object refused (bad signature, digest): not fetched again by this process. */
  refusedObject?: string;
}

const STEP_ID = "host.release";

/** A report with the release's step last; a failed one fails the report, as any failed step does. */
export function withStep(report: Report, s: ReportStep): Report {
  const now = new Date().toISOString();
  return {
    ...report,
    steps: [...report.steps, s],
    outcome: s.did === "failed" ? "failed" : report.outcome,
    finished_at: now,
  };
}

const step = (did: ReportStep["did"], detail: string): ReportStep => ({
  id: STEP_ID,
  type: "release",
  did,
  detail,
});
const failed = (detail: string, refusedObject?: string): Upgraded => ({
  step: step("failed", detail),
  restart: false,
  ...(refusedObject ? { refusedObject } : {}),
});

/** The release `version` for this host, fetched, verified and installed; or why not, replacing nothing. */
export async function upgradeTo(version: string, source: ReleaseSource, d: UpgradeDeps): Promise<Upgraded> {
  const arch = ReleaseArch.safeParse(process.arch);
  if (!arch.success) return failed(`no release is made for this processor (${process.arch})`);
  const target = d.installed?.path;
  if (!target)
    return failed("this host does not run as the installed executable: there is nothing to replace");
  const name = releaseObjectName(version, d.kind, arch.data);
  const meta = await source.meta(name);
  if (!meta) return failed(`release ${name} is not in the mesh's releases`);
  const read = verifyManifest(meta.description, d.meshKey);
  if (!read.ok) return failed(`release ${name} refused: ${read.reason}`, meta.nuid);
  const m = read.manifest;
  if (m.version !== version || m.kind !== d.kind || m.arch !== arch.data)
    return failed(
      `release ${name} refused: its signed manifest is for ${releaseObjectName(m.version, m.kind, m.arch)}`,
      meta.nuid,
    );
  const dir = releaseDir(d.state);
  if (await isInstalled(m, d)) {
    // what a kill between the swap and its tidying left: the fetch of a release now installed
    if (existsSync(dir)) sweepOthers(dir, "");
    return { step: step("unchanged", `release ${version} is installed`), restart: false };
  }
  const room = roomProblem(m, dir, dirname(target));
  if (room) return failed(`release ${version} not fetched: ${room}`);
  const stored = await fetchStored(meta, m, source, dir);
  if (!stored.ok)
    return stored.refused
      ? failed(`release ${version} refused: ${stored.reason}`, meta.nuid)
      : failed(`release ${version}: ${stored.reason}`);
  if (stored.resumedFrom > 0)
    d.log.info(
      { release: version, from: stored.resumedFrom },
      "the fetch of a release resumed where it was cut",
    );
  return await install(m, stored.path, target, d);
}

/** The installed binary is this release already (it may be one the launcher rolled back from: not fetched again). */
async function isInstalled(m: ReleaseManifest, d: UpgradeDeps): Promise<boolean> {
  const now = await d.installed?.digest();
  if (!now) return false;
  const record = readInstalled(d.state);
  const binary = record?.manifest === m.sha256 ? record.binary : m.sha256;
  return now === binary;
}

/** What this host keeps of the last release it installed: Arch's binary is not the package the manifest names. */
function readInstalled(state: State): { manifest: string; binary: string } | null {
  try {
    const v = state.readInstalledRelease() as { manifest?: unknown; binary?: unknown } | null;
    return typeof v?.manifest === "string" && typeof v?.binary === "string"
      ? { manifest: v.manifest, binary: v.binary }
      : null;
  } catch {
    return null;
  }
}

export const releaseDir = (state: State): string => state.releaseDir();

/** Why the disk has no room for the fetch and the unpacked file (null when it has). */
function roomProblem(m: ReleaseManifest, fetchDir: string, installDir: string): string | null {
  mkdirSync(fetchDir, { recursive: true, mode: STATE_DIR_MODE });
  const need = new Map<number, { dir: string; bytes: number }>();
  const add = (dir: string, bytes: number) => {
    const dev = statSync(dir).dev;
    const had = need.get(dev);
    need.set(dev, { dir: had?.dir ?? dir, bytes: (had?.bytes ?? 0) + bytes });
  };
  add(fetchDir, m.stored.size + (m.kind === "arch" ? m.size : 0));
  if (m.kind !== "arch") add(installDir, m.size);
  for (const { dir, bytes } of need.values()) {
    const fs = statfsSync(dir);
    const free = fs.bavail * fs.bsize;
    if (free < bytes + RELEASE_SPACE_MARGIN_BYTES)
      return `no room on the disk of ${dir}: ${mib(bytes + RELEASE_SPACE_MARGIN_BYTES)} needed, ${mib(free)} free`;
  }
  return null;
}

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** Unpacked beside its destination and checked, then swapped in: renamed over the binary, or pacman -U. */
async function install(
  m: ReleaseManifest,
  stored: string,
  target: string,
  d: UpgradeDeps,
): Promise<Upgraded> {
  const dest =
    m.kind === "arch" ? join(dirname(stored), `mesh-host-${m.version}-${m.arch}.pkg.tar.zst`) : target;
  // temp files a killed install left beside the binary (or the package)
  sweepTempsBeside(dest);
  const temp = tempPathFor(dest);
  const unpacked = await unpack(stored, m, temp).catch(
    (e: Error) => `it could not be unpacked (${e.message})`,
  );
  if (unpacked !== null) {
    rmSync(temp, { force: true });
    sweepOthers(dirname(stored), "");
    return failed(`release ${m.version} refused: ${unpacked}`);
  }
  if (m.kind !== "arch") {
    await commitTemp(temp, target);
    d.state.writeInstalledRelease({ manifest: m.sha256, binary: m.sha256 });
  } else {
    await commitTemp(temp, dest);
    const refused = d.installPackage
      ? await d.installPackage(d.exec, dest)
      : "this executable installs no packages";
    rmSync(dest, { force: true });
    if (refused) return failed(`release ${m.version}: pacman -U refused it: ${refused}`);
    // what pacman put at the installed path now, not what this process started as
    const binary = await digestOfFile(target);
    d.state.writeInstalledRelease({ manifest: m.sha256, binary: binary ?? "" });
  }
  sweepOthers(dirname(stored), "");
  d.log.info({ release: m.version, sha256: m.sha256 }, "release installed: exiting to be restarted onto it");
  return { step: step("updated", `release ${m.version} installed: restarting onto it`), restart: true };
}

const DECOMPRESSORS: Record<ReleaseEncoding, (() => Transform) | undefined> = {
  zstd: (zlib as unknown as { createZstdDecompress?: () => Transform }).createZstdDecompress,
  gzip: zlib.createGunzip,
  br: zlib.createBrotliDecompress,
};

/** The stored object decompressed into `temp` (0700), its size and digest the manifest's; why not, else null. */
async function unpack(stored: string, m: ReleaseManifest, temp: string): Promise<string | null> {
  const decompressor = DECOMPRESSORS[m.encoding];
  if (!decompressor) return `this host's runtime cannot decompress ${m.encoding}`;
  const hash = createHash("sha256");
  let size = 0;
  const count = new Transform({
    transform(chunk: Buffer, _e, done) {
      size += chunk.length;
      // the manifest says how big: a larger output is refused as it grows, never written whole
      if (size > m.size)
        return done(new Error(`it unpacks to more than the ${m.size} bytes its manifest says`));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  const out = createWriteStream(temp, { mode: EXECUTABLE_MODE, flags: "wx" });
  await pipeline(createReadStream(stored), decompressor.call(zlib), count, out);
  // the launcher and the init run it with the mode it is installed with
  await syncFilled(temp, EXECUTABLE_MODE);
  if (size !== m.size) return `it unpacks to ${size} bytes, its manifest says ${m.size}`;
  if (hash.digest("hex") !== m.sha256) return "its unpacked SHA-256 is not its manifest's";
  return null;
}
