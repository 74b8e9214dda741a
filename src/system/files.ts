// Reads and effects on declared paths, every one on a handle the no-follow walk gave (walk.ts says how).
// Reads for a decision use the apply's kept directory handles; every effect, and every read-back, walks
// from the root afresh.
import {
  chmodSync,
  chownSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFile as readFileCb,
  readFileSync,
  readSync,
  rmdirSync,
  type Stats,
  unlinkSync,
} from "node:fs";
import { basename, dirname } from "node:path";
import { promisify } from "node:util";
import { SYNC_READ_MAX_BYTES } from "../defaults.ts";
import {
  fillTemp,
  fsPromises,
  fsyncDirShared,
  isTempName,
  renameTemp,
  tempPathFor,
} from "../durable/index.ts";
import { errnoWords } from "../faults.ts";
import {
  at,
  type DirMaker,
  ENTRY_HANDLE,
  forgetUnder,
  keptDir,
  type Opened,
  openChildDir,
  PathRefused,
  walkDir,
  walkParent,
} from "./walk.ts";

const readFd = promisify(readFileCb);

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export interface Entry {
  kind: "file" | "directory" | "link" | "other";
  mode: number;
  uid: number;
  gid: number;
}

export interface FileRead {
  bytes: Uint8Array;
  mode: number;
  uid: number;
  gid: number;
}

/** `fresh`: walk from the root now (an effect's read-back); otherwise the apply's kept handles (a decision). */
export type Fresh = boolean;

const code = (e: unknown) => (e as NodeJS.ErrnoException).code ?? "error";

/** An errno failure worded with the declared path, never the /proc/self/fd name it was done through. */
function failure(path: string, verb: string, e: unknown): Error {
  if (e instanceof PathRefused) return e;
  return new Error(`could not ${verb} ${path}: ${errnoWords(code(e))}`);
}

/** The directory of `path` as a handle, and whether the caller closes it. */
function dirOf(root: string, path: string, fresh: Fresh): Opened & { owned?: boolean } {
  if (!fresh) return keptDir(root, dirname(path), path);
  const opened = walkDir(root, dirname(path), path);
  return "fd" in opened ? { ...opened, owned: true } : opened;
}

function entryOf(st: Stats): Entry {
  const kind = st.isSymbolicLink() ? "link" : st.isFile() ? "file" : st.isDirectory() ? "directory" : "other";
  return { kind, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
}

/** What is at declared `path` itself (a link is a link), null when nothing is, or why its parents stop the walk. */
export function entryAt(root: string, path: string, fresh: Fresh = false): Entry | null | string {
  const d = dirOf(root, path, fresh);
  if ("problem" in d) return d.problem;
  if ("absent" in d) return null;
  try {
    return entryOf(lstatSync(at(d.fd, basename(path))));
  } catch (e) {
    if (code(e) === "ENOENT") return null;
    return `${path} cannot be read: ${code(e)}`;
  } finally {
    if (d.owned) closeSync(d.fd);
  }
}

/** The names in declared directory `path`, or none when it cannot be listed (absent, a link, not a directory). */
export function listAt(root: string, path: string): string[] {
  const d = keptDir(root, path, path);
  if (!("fd" in d)) return [];
  try {
    return readdirSync(at(d.fd));
  } catch {
    return [];
  }
}

/** An fd on the regular file at declared `path` (never through a link), null when absent, or why not. */
function openRegular(root: string, path: string, fresh: Fresh): { fd: number; st: Stats } | null | string {
  const d = dirOf(root, path, fresh);
  if ("problem" in d) return d.problem;
  if ("absent" in d) return null;
  let fd: number;
  try {
    fd = openSync(at(d.fd, basename(path)), READ_FLAGS);
  } catch (e) {
    if (code(e) === "ENOENT") return null;
    if (code(e) === "ELOOP") return `${path} is a symbolic link; it is not followed`;
    return `${path} cannot be read: ${code(e)}`;
  } finally {
    if (d.owned) closeSync(d.fd);
  }
  const st = fstatSync(fd);
  if (st.isFile()) return { fd, st };
  closeSync(fd);
  return `${path} exists and is not a regular file`;
}

/**
 * An fd on the regular file at declared `path`, walked afresh: what another program is given (as /dev/fd/N)
 * instead of a name it would resolve itself, following whatever link was swapped in since. The caller closes it.
 */
export function openFileAt(root: string, path: string): number | null | string {
  const opened = openRegular(root, path, true);
  return opened === null || typeof opened === "string" ? opened : opened.fd;
}

/**
 * A regular file at declared `path`: its bytes and mode, null when absent, or why it cannot be managed (a
 * link is never followed). Small files are read synchronously: for a 200-byte file, thread-pool round trips
 * cost more than the read, and the drift check reads every managed file.
 */
export async function readFileAt(
  root: string,
  path: string,
  fresh: Fresh = false,
): Promise<FileRead | null | string> {
  const opened = openRegular(root, path, fresh);
  if (opened === null || typeof opened === "string") return opened;
  const { fd, st } = opened;
  try {
    const bytes = st.size <= SYNC_READ_MAX_BYTES ? readSmall(fd, st.size) : await readFd(fd);
    return { bytes, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  } catch (e) {
    return `${path} cannot be read: ${code(e)}`;
  } finally {
    closeSync(fd);
  }
}

/**
 * A small file in one read of the size its fstat gave, and a byte more to see it did not grow since: the drift
 * check reads every managed file, and readFileSync(fd) would fstat it again and read twice (issue 22).
 */
function readSmall(fd: number, size: number): Buffer {
  const buf = Buffer.allocUnsafe(size + 1);
  const n = readSync(fd, buf, 0, size + 1, 0);
  // grown since the fstat: read it whole (a positional read left the offset at 0)
  return n <= size ? buf.subarray(0, n) : readFileSync(fd);
}

export interface WriteOptions {
  mode: number;
  uid?: number;
  gid?: number;
  /** How each missing parent directory is made on the way; none are made without it. */
  dirMode?: DirMaker;
}

/**
 * Write declared `path` atomically: a temp file made beside it (O_EXCL, never through a link), written,
 * chmod'ed and chown'ed on its own fd, fsync'ed, renamed over the name in the same directory handle, the
 * directory fsync'ed. Missing parents are made on the way. Throws PathRefused when a link is in the way.
 */
export async function writeFileAt(
  root: string,
  path: string,
  bytes: Uint8Array,
  o: WriteOptions,
): Promise<void> {
  const { dir, name } = walkParent(root, path, o.dirMode);
  try {
    const temp = basename(tempPathFor(name));
    const handle = await fsPromises()
      .open(at(dir, temp), CREATE_FLAGS, o.mode)
      .catch((e) => {
        throw failure(path, "write", e);
      });
    await fillTemp(handle, at(dir, temp), bytes, o).catch((e) => {
      throw failure(path, "write", e);
    });
    // rename never follows its last component: a link planted at the name is replaced, not written through
    await renameTemp(at(dir, temp), at(dir, name)).catch((e) => {
      throw failure(path, "write", e);
    });
    // one fsync per directory for a batch of writers, keyed by the declared directory (the fd numbers differ)
    await fsyncDirShared(at(dir), `${root}\0${dirname(path)}`);
  } finally {
    closeSync(dir);
  }
}

/**
 * A fresh handle on declared directory `path` (made as `make` says, and its missing parents too, when `make`
 * is given), never through a link. The caller closes it. Throws PathRefused, or when absent and not made.
 */
export function openDirAt(root: string, path: string, make?: DirMaker): number {
  const { dir, name } = walkParent(root, path, make);
  try {
    const opened = openChildDir(root, dir, name, path, path, make);
    if ("problem" in opened) throw new PathRefused(opened.problem);
    if ("absent" in opened) throw new PathRefused(`${path} does not exist`);
    return opened.fd;
  } finally {
    closeSync(dir);
  }
}

/** chmod and chown the directory or file behind handle `fd` itself: /proc/self/fd/<fd> is that inode. */
export function setOnHandle(
  fd: number,
  path: string,
  o: { mode?: number; uid?: number; gid?: number },
): void {
  try {
    if (o.mode !== undefined) chmodSync(at(fd), o.mode);
    if (o.uid !== undefined || o.gid !== undefined) chownSync(at(fd), o.uid ?? -1, o.gid ?? -1);
  } catch (e) {
    throw failure(path, "change", e);
  }
}

/** chmod declared directory `path`, reached without following a link. */
export function chmodDirAt(root: string, path: string, mode: number): void {
  const fd = openDirAt(root, path);
  try {
    setOnHandle(fd, path, { mode });
  } finally {
    closeSync(fd);
  }
}

/** Remove everything inside directory handle `fd`, following no link (a link inside goes itself); files counted. */
function emptyDir(fd: number): number {
  let files = 0;
  for (const name of readdirSync(at(fd))) files += removeEntryIn(fd, name);
  return files;
}

/** Remove `name` inside directory handle `dirFd`, a directory with all it holds; how many files went. */
export function removeEntryIn(dirFd: number, name: string): number {
  let h: number;
  try {
    h = openSync(at(dirFd, name), ENTRY_HANDLE);
  } catch (e) {
    if (code(e) === "ENOENT") return 0;
    throw e;
  }
  try {
    if (!fstatSync(h).isDirectory()) {
      unlinkSync(at(dirFd, name));
      return 1;
    }
    const files = emptyDir(h);
    rmdirSync(at(dirFd, name));
    return files;
  } finally {
    closeSync(h);
  }
}

/** Remove a file or a link at declared `path` (never what a link points at); true if something went. */
export function removeFileAt(root: string, path: string): boolean {
  const d = walkDir(root, dirname(path), path);
  if ("problem" in d) throw new PathRefused(d.problem);
  if ("absent" in d) return false;
  const name = basename(path);
  try {
    if (lstatSync(at(d.fd, name)).isDirectory()) throw new PathRefused(`${path} is a directory`);
    unlinkSync(at(d.fd, name));
    return true;
  } catch (e) {
    if (code(e) === "ENOENT") return false;
    throw failure(path, "remove", e);
  } finally {
    closeSync(d.fd);
  }
}

/** Remove the empty directory at declared `path`: "removed", "absent", or "not-empty" (left as it is). */
export function removeDirAt(root: string, path: string): "removed" | "absent" | "not-empty" {
  const d = walkDir(root, dirname(path), path);
  if ("problem" in d) throw new PathRefused(d.problem);
  if ("absent" in d) return "absent";
  try {
    // rmdir never follows its last component: a link there is ENOTDIR, and nothing is removed
    rmdirSync(at(d.fd, basename(path)));
    forgetUnder(root, path);
    return "removed";
  } catch (e) {
    if (code(e) === "ENOENT") return "absent";
    if (code(e) === "ENOTEMPTY" || code(e) === "EEXIST") return "not-empty";
    throw failure(path, "remove", e);
  } finally {
    closeSync(d.fd);
  }
}

/**
 * Remove the directory at declared `path` and everything in it, following no link: a link inside is removed
 * itself, and a `path` that is itself a link is left alone (with the reason). How many files went, or why
 * nothing was removed.
 */
export function removeTreeAt(root: string, path: string): { files: number; existed: boolean } | string {
  const d = walkDir(root, dirname(path), path);
  if ("problem" in d) return d.problem;
  if ("absent" in d) return { files: 0, existed: false };
  const name = basename(path);
  try {
    let st: Stats;
    try {
      st = lstatSync(at(d.fd, name));
    } catch (e) {
      if (code(e) === "ENOENT") return { files: 0, existed: false };
      throw failure(path, "remove", e);
    }
    if (st.isSymbolicLink()) return `${path} is a symbolic link; it was left, not followed`;
    if (!st.isDirectory()) return `${path} is not a directory; it was left`;
    const files = removeEntryIn(d.fd, name);
    forgetUnder(root, path);
    return { files, existed: true };
  } finally {
    closeSync(d.fd);
  }
}

/** Temporary files a crash left in each declared directory of `dirs`: removed, reached without a link. */
export function sweepTempsAt(root: string, dirs: Iterable<string>): void {
  for (const dir of dirs) {
    const d = walkDir(root, dir);
    if (!("fd" in d)) continue;
    try {
      for (const n of readdirSync(at(d.fd)).filter(isTempName)) {
        try {
          unlinkSync(at(d.fd, n));
        } catch {
          // gone already, or not ours to remove
        }
      }
    } catch {
      // unreadable: nothing swept
    } finally {
      closeSync(d.fd);
    }
  }
}
