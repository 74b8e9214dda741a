// The mesh directory's writes and its one lock. The lock is its own, not the store's: this layer imports nothing
// of the host's (a test proves it); the atomic write is the one outside every layer (src/atomic.ts).
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomicSync } from "../atomic.ts";
import { MESH_FILE_MODE, MESH_LOCK_POLL_MS, MESH_LOCK_WAIT_MS } from "../defaults.ts";

/** The old file or the new, never half (src/atomic.ts); the mesh directory's files are the operator's alone. */
export function writeAtomic(path: string, data: string | Uint8Array, mode = MESH_FILE_MODE): void {
  writeFileAtomicSync(path, data, mode);
}

export { fsyncDirSync as syncDir } from "../atomic.ts";

export interface Held {
  release(): void;
}

/**
 * The directory's lock: a file made exclusively, holding the pid. One left by a process that is gone is taken
 * over; one held by a live process is waited for (`node add` while `up` answers an enrolment).
 */
export async function lockMesh(dir: string, waitMs = MESH_LOCK_WAIT_MS): Promise<Held> {
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
    else await new Promise((r) => setTimeout(r, MESH_LOCK_POLL_MS));
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
