// The mesh directory's writes and its one lock. Its own, not the store's: this layer imports nothing of the
// host's (a test proves it), and these are twenty lines.
import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { LOCK_WAIT_MS, MESH_FILE_MODE } from "./defaults.ts";

/** Temp file in the same directory, fsynced, renamed, the directory fsynced: the old file or the new, never half. */
export function writeAtomic(path: string, data: string | Uint8Array, mode = MESH_FILE_MODE): void {
  const temp = join(dirname(path), `.${basename(path)}.tmp-${randomBytes(4).toString("hex")}`);
  const fd = openSync(temp, "wx", mode);
  try {
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    let off = 0;
    while (off < bytes.byteLength) off += writeSync(fd, bytes, off);
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temp, path);
  } catch (e) {
    try {
      unlinkSync(temp);
    } catch {}
    throw e;
  }
  syncDir(dirname(path));
}

export function syncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export interface Held {
  release(): void;
}

/**
 * The directory's lock: a file made exclusively, holding the pid. One left by a process that is gone is taken
 * over; one held by a live process is waited for (`node add` while `up` answers an enrolment).
 */
export async function lockMesh(dir: string, waitMs = LOCK_WAIT_MS): Promise<Held> {
  const path = join(dir, "lock");
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const fd = openSync(path, "wx", MESH_FILE_MODE);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return { release: () => unlinkQuiet(path) };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const holder = holderOf(path);
    if (holder !== null && !alive(holder)) unlinkQuiet(path);
    else if (Date.now() > deadline) throw new LockBusy(holder);
    else await new Promise((r) => setTimeout(r, 20));
  }
}

export class LockBusy extends Error {
  constructor(readonly pid: number | null) {
    super(`the mesh directory is locked by another mesh command (pid ${pid ?? "unknown"})`);
  }
}

function holderOf(path: string): number | null {
  try {
    const pid = Number(readFileSync(path, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {}
}
