// Nothing is ever half-written: temp file in the same directory, fsync, rename, fsync the directory. One file at
// once (sync), many at once (async, their fsyncs overlapping, one directory fsync shared by a batch of renames).
import { randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  fchmodSync,
  fsyncSync,
  openSync,
  readdirSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { STATE_FILE_MODE, TEMP_MARKER } from "../defaults.ts";

/** A temporary name beside `path`, marked so a later start can sweep what a crash left. */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}${TEMP_MARKER}${randomBytes(4).toString("hex")}`);
}

/**
 * node:fs/promises at the first write, not at start-up: it brings readline and the REPL's history with it, and
 * `plan`, `status` or a no-op write nothing through it (issue 22).
 */
export const fsPromises = () => process.getBuiltinModule("node:fs/promises");

export function isTempName(name: string): boolean {
  return name.startsWith(".") && name.includes(TEMP_MARKER);
}

/**
 * Write `data` to `path` atomically and durably; `mode` is set before the rename so no reader sees it wider.
 * `syncDir` false leaves the rename to the next sync of its directory: a crash may then keep the file before
 * it, whole, never a torn one. Only for files that decide nothing (what the last apply did).
 */
export function writeFileAtomicSync(
  path: string,
  data: string | Uint8Array,
  mode = STATE_FILE_MODE,
  syncDir = true,
): void {
  const temp = tempPathFor(path);
  const fd = openSync(temp, "wx", mode);
  try {
    writeAllSync(fd, typeof data === "string" ? Buffer.from(data) : data);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    unlinkQuietSync(temp);
    throw e;
  }
  closeSync(fd);
  renameOverSync(temp, path, syncDir);
}

/**
 * A temp file filled by other means (a copy) made what writeFileAtomicSync makes: its mode set (the umask
 * narrowed what it was made with), fsynced, renamed over `path`, the directory fsynced. On a failure the temp
 * file is gone.
 */
export function commitTempSync(temp: string, path: string, mode: number): void {
  try {
    const fd = openSync(temp, "r");
    try {
      fchmodSync(fd, mode);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    unlinkQuietSync(temp);
    throw e;
  }
  renameOverSync(temp, path, true);
}

function renameOverSync(temp: string, path: string, syncDir: boolean): void {
  try {
    renameSync(temp, path);
  } catch (e) {
    unlinkQuietSync(temp);
    throw e;
  }
  if (syncDir) fsyncDirSync(dirname(path));
}

/** The temp files a killed writer of `path` left beside it (its own name's only), removed. */
export function sweepTempsBeside(path: string): void {
  const dir = dirname(path);
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir))
    if (isTempName(name) && name.startsWith(`.${basename(path)}`)) unlinkQuietSync(join(dir, name));
}

export function fsyncDirSync(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function writeAllSync(fd: number, data: Uint8Array): void {
  let offset = 0;
  while (offset < data.byteLength) offset += writeSync(fd, data, offset, data.byteLength - offset);
}

function unlinkQuietSync(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/**
 * A new temp file filled through its handle and closed: the bytes, its mode (chmod on the fd: the umask may have
 * narrowed the mode given to open), its owner, fsynced. On a failure the temp file is gone too.
 */
export async function fillTemp(
  handle: FileHandle,
  temp: string,
  data: Uint8Array,
  o: { mode: number; uid?: number; gid?: number },
): Promise<void> {
  try {
    await handle.writeFile(data);
    await handle.chmod(o.mode);
    if (o.uid !== undefined || o.gid !== undefined) await handle.chown(o.uid ?? -1, o.gid ?? -1);
    await handle.sync();
  } catch (e) {
    await handle.close();
    await fsPromises()
      .unlink(temp)
      .catch(() => {});
    throw e;
  }
  await handle.close();
}

/**
 * A temp file filled by other means (a stream) made durable with its mode (chmod on the fd: the umask narrowed
 * what it was made with), fsynced; on a failure the temp file is gone. Renamed over its path by `commitTemp`.
 */
export async function syncFilled(temp: string, mode: number): Promise<void> {
  try {
    const h = await fsPromises().open(temp, "r");
    try {
      await h.chmod(mode);
      await h.sync();
    } finally {
      await h.close();
    }
  } catch (e) {
    await fsPromises()
      .unlink(temp)
      .catch(() => {});
    throw e;
  }
}

/** A synced temp file renamed over `path`, and the rename made durable (its directory fsynced). */
export async function commitTemp(temp: string, path: string): Promise<void> {
  await renameTemp(temp, path);
  await fsyncDir(dirname(path));
}

/** The filled temp file renamed over `path`; on a failure the temp file is gone. */
export async function renameTemp(temp: string, path: string): Promise<void> {
  try {
    await fsPromises().rename(temp, path);
  } catch (e) {
    await fsPromises()
      .unlink(temp)
      .catch(() => {});
    throw e;
  }
}

export interface AtomicWriteOptions {
  mode: number;
  uid?: number;
  gid?: number;
  /** Skip the directory fsync: the caller syncs each directory once after a batch of renames. */
  skipDirSync?: boolean;
}

/** The async twin, so many files' fsyncs overlap on Node's thread pool while each stays atomic. */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array,
  opts: AtomicWriteOptions,
): Promise<void> {
  const temp = tempPathFor(path);
  await fillTemp(await fsPromises().open(temp, "wx", opts.mode), temp, data, opts);
  await renameTemp(temp, path);
  if (!opts.skipDirSync) await fsyncDirShared(dirname(path));
}

interface DirSync {
  running: Promise<void> | null;
  queued: Promise<void> | null;
}
const dirSyncs = new Map<string, DirSync>();

/**
 * An fsync of `dir` that starts after this call, shared by every writer that asks before it starts: a
 * thousand renames into one directory need not be a thousand directory fsyncs. Each caller has renamed
 * before asking, so the shared fsync still covers its rename. `key` names the directory when `dir` is a
 * handle's /proc/self/fd path (each writer's differs); the first asker's handle is synced, and every asker
 * awaits it, so that handle is still open when the sync runs.
 */
export function fsyncDirShared(dir: string, key = dir): Promise<void> {
  let entry = dirSyncs.get(key);
  if (!entry) {
    entry = { running: null, queued: null };
    dirSyncs.set(key, entry);
  }
  if (entry.queued) return entry.queued;
  const e = entry;
  const queued = (async () => {
    if (e.running) await e.running.catch(() => {});
    e.queued = null;
    const running = fsyncDir(dir);
    e.running = running;
    try {
      await running;
    } finally {
      if (e.running === running) e.running = null;
      if (!e.running && !e.queued) dirSyncs.delete(key);
    }
  })();
  e.queued = queued;
  return queued;
}

export async function fsyncDir(dir: string): Promise<void> {
  const handle = await fsPromises().open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
