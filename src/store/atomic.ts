// Nothing is ever half-written: temp file in the same directory, fsync, rename, fsync the directory. The one
// file's synchronous write is shared with the operator's half (src/atomic.ts); here, many files written at once.
import { dirname } from "node:path";
import { fillTemp, fsPromises, renameTemp, tempPathFor } from "../atomic.ts";

export { fsyncDirSync, isTempName, tempPathFor, writeFileAtomicSync } from "../atomic.ts";

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
