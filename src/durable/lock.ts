// A file lock naming its holder by pid and start time: a holder killed with SIGKILL never leaves it stuck, and a
// recycled pid is not mistaken for it. The store's state lock is this one (store/lock.ts names its file).
import {
  closeSync,
  constants,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { EMPTY_LOCK_GRACE_MS, LOCK_POLL_MS, LOCK_WAIT_MS, STATE_FILE_MODE } from "../defaults.ts";

export interface Lock {
  release(): void;
}

export class LockBusy extends Error {
  constructor(readonly holder: string) {
    super(`the state is locked by ${holder}`);
  }
}

/** The lock's path is not a lock this host made (a link planted there): refused, never waited out. */
export class LockRefused extends Error {}

/** The process's start time from /proc, so a recycled pid is not mistaken for the holder. */
export function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

function holderAlive(content: string): boolean {
  const [pidText, started] = content.trim().split(" ");
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const now = startTimeOf(pid);
  return now !== null && (started === undefined || started === now);
}

function tryTake(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", STATE_FILE_MODE);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  }
  writeSync(fd, `${process.pid} ${startTimeOf(process.pid) ?? ""}\n`);
  closeSync(fd);
  return true;
}

/** Move a dead holder's lock aside; rename is atomic, so of two takers only one moves it. */
function breakIfDead(path: string): void {
  let content: string;
  try {
    content = readLock(path);
  } catch (e) {
    // a link swapped in after the look: said as one at the loop's next turn
    if ((e as NodeJS.ErrnoException).code === "ELOOP") refuseLink(path);
    return;
  }
  // a lock being written this instant reads empty: give its writer a moment rather than break it
  if (content === "" && Date.now() - mtimeOf(path) < EMPTY_LOCK_GRACE_MS) return;
  if (content !== "" && holderAlive(content)) return;
  const aside = `${path}.stale-${process.pid}`;
  try {
    renameSync(path, aside);
    unlinkSync(aside);
  } catch {
    // somebody else broke it first
  }
}

/** The lock's content, never through a link (ELOOP): root reads nothing a planted link points at. */
function readLock(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

function mtimeOf(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return Date.now();
  }
}

function describeHolder(path: string): string {
  try {
    return `pid ${readLock(path).trim().split(" ")[0]}`;
  } catch {
    return "another process";
  }
}

/**
 * A link planted at the lock path (dangling or not) is refused at once: O_EXCL never takes it and its "holder"
 * never dies, so every command would wait out the whole timeout; and root must not read where it points.
 */
function refuseLink(path: string): void {
  let isLink = false;
  try {
    isLink = lstatSync(path).isSymbolicLink();
  } catch {
    return;
  }
  if (isLink)
    throw new LockRefused(
      `${path} is a symbolic link, not a lock this host made: refused (remove it if nobody should have put it there)`,
    );
}

/** Take the lock file at `path`, waiting up to `waitMs` for a live holder to finish. */
export async function takeLock(path: string, waitMs = LOCK_WAIT_MS): Promise<Lock> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    refuseLink(path);
    if (tryTake(path)) return { release: () => releaseLock(path) };
    breakIfDead(path);
    if (tryTake(path)) return { release: () => releaseLock(path) };
    if (Date.now() >= deadline) throw new LockBusy(describeHolder(path));
    await new Promise((r) => setTimeout(r, LOCK_POLL_MS));
  }
}

function releaseLock(path: string): void {
  try {
    if (readLock(path).split(" ")[0] === String(process.pid)) unlinkSync(path);
  } catch {
    // already gone
  }
}
