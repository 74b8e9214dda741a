// Nothing is ever half-written: temp file in the same directory, fsync, rename, fsync the directory.
import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { TEMP_MARKER } from "../defaults.ts";

/** A temporary name beside `path`, marked so a later start can sweep what a crash left. */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}${TEMP_MARKER}${randomBytes(4).toString("hex")}`);
}

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
  mode = 0o600,
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
  try {
    renameSync(temp, path);
  } catch (e) {
    unlinkQuietSync(temp);
    throw e;
  }
  if (syncDir) fsyncDirSync(dirname(path));
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
  const handle = await open(temp, "wx", opts.mode);
  try {
    await handle.writeFile(data);
    // chmod explicitly: the umask may have narrowed the mode given to open
    await handle.chmod(opts.mode);
    if (opts.uid !== undefined || opts.gid !== undefined) await handle.chown(opts.uid ?? -1, opts.gid ?? -1);
    await handle.sync();
  } catch (e) {
    await handle.close();
    await unlink(temp).catch(() => {});
    throw e;
  }
  await handle.close();
  try {
    await rename(temp, path);
  } catch (e) {
    await unlink(temp).catch(() => {});
    throw e;
  }
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
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
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
