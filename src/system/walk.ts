// The no-follow walk: a declared path resolved one component at a time from a handle on the root, no link
// ever followed, each step landing on a handle (an fd) rather than a name.
//
// Node has no openat(2). What gives its effect, and why this one:
// - `open("/proc/self/fd/<dirfd>/<name>", O_PATH | O_DIRECTORY | O_NOFOLLOW)`: the kernel resolves
//   /proc/self/fd/<dirfd> as the open directory itself (a "magic link": no name is looked up again), then
//   looks up the one component <name> in it, and O_NOFOLLOW refuses it if it is a link. A component
//   swapped for a link at any time cannot redirect a walk already past it, and cannot be followed when
//   reached. Every effect is then done on `/proc/self/fd/<fd>` or `/proc/self/fd/<dirfd>/<name>`: rename,
//   unlink, rmdir and mkdir never follow their last component, chmod and chown on /proc/self/fd/<fd> reach
//   the handle's own inode, and files are opened with O_NOFOLLOW (then fstat'ed, never lstat'ed by name).
// - O_PATH, not O_RDONLY, for the walk's handles: an O_PATH open needs only search permission, exactly what
//   the kernel's own path walk needs, so a rootless host (Android) can walk through any directory it could
//   walk through by name; O_RDONLY would need read permission on every directory. (fchmod and fsync refuse
//   O_PATH handles: chmod goes through /proc/self/fd/<fd>, and a directory is reopened O_RDONLY to fsync.)
// - Rejected: lstat each component, then act by name (a swap between the check and the act wins);
//   realpath before and after (the same race, twice); a native addon with openat2(RESOLVE_NO_SYMLINKS)
//   (a compiler in the build and a binary per architecture, for what /proc gives on every Linux kernel).
// - Measured (Node 20, this 2-core machine): open+fstat+read+close of a 200-byte file through
//   /proc/self/fd/<dirfd>/<name> takes ~17 µs, against ~26 µs for the lstat + readFile by name it replaces;
//   one O_PATH directory open through /proc ~7 µs. Decisions reuse directory handles for one apply, so a
//   thousand files in ten directories open ten directories, not three thousand.
//
// /proc is the one dependency: without /proc/self/fd (a chroot or container that did not mount it) every
// path is refused with one reason saying so, rather than acted on by name. Android mounts /proc for every app.
import {
  chmodSync,
  chownSync,
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  statSync,
} from "node:fs";
import { basename, dirname, sep } from "node:path";
import { KEPT_DIR_HANDLES_MAX } from "../defaults.ts";
import { errnoWords } from "../faults.ts";

/** Linux's O_PATH on x86, x86-64, arm and arm64 (every machine the host ships for); Node does not export it. */
const O_PATH = 0o10000000;
/** A directory handle: no link followed, search permission only. */
const DIR_HANDLE = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** A handle on whatever is at a name, a link itself included (then fstat says so). */
const ENTRY_HANDLE = O_PATH | constants.O_NOFOLLOW;

const PROC_FD = "/proc/self/fd";
/** How many times a missing directory is made before a walk gives up on a name that keeps vanishing. */
const MAKE_TRIES = 3;

/** The path the kernel resolves as handle `fd` itself, or as `name` inside the directory handle `fd`. */
export const at = (fd: number, name?: string): string =>
  name === undefined ? `${PROC_FD}/${fd}` : `${PROC_FD}/${fd}/${name}`;

/** A path refused because of what is on it (a link, a file where a directory must be); the message names it. */
export class PathRefused extends Error {}

let procMissing: string | null | undefined;

/** Why handles cannot be acted on here (no /proc/self/fd), or null; asked once per process. */
export function handlesProblem(): string | null {
  if (procMissing === undefined) {
    try {
      procMissing = statSync(PROC_FD).isDirectory() ? null : `${PROC_FD} is not a directory`;
    } catch {
      procMissing = `${PROC_FD} is missing`;
    }
    if (procMissing)
      procMissing = `${procMissing}: without /proc the host cannot act on a path without following links, so it acts on none`;
  }
  return procMissing;
}

/** The components of a declared path ("/a/b" → ["a", "b"]); the vocabulary's rule already refused ".." and "". */
export function componentsOf(path: string): string[] {
  const parts = path.split("/").filter((p) => p !== "");
  if (parts.some((p) => p === "." || p === ".."))
    throw new PathRefused(`${path} is not a normalised path; it is not walked`);
  return parts;
}

const realRoots = new Map<string, string>();

function realRootOf(root: string): string {
  let real = realRoots.get(root);
  if (real === undefined) {
    real = realpathSync.native(root);
    realRoots.set(root, real);
  }
  return real;
}

/** Where a link at `name` in `dirFd` points, resolved: only to word the refusal (nothing is acted on there). */
function leavesRoot(root: string, dirFd: number, name: string): boolean {
  try {
    const real = realpathSync.native(at(dirFd, name));
    const base = realRootOf(root);
    return !(base === "/" || real === base || real.startsWith(base + sep));
  } catch {
    return false;
  }
}

/** Why component `name` (reached as `prefix`) cannot be walked through on the way to `path`. */
function blocked(root: string, dirFd: number, name: string, prefix: string, path: string): string {
  let link = false;
  try {
    link = lstatSync(at(dirFd, name)).isSymbolicLink();
  } catch {
    // gone again: worded as not a directory
  }
  const whose = prefix === path ? path : `a parent of ${path} (${prefix})`;
  if (!link) return `${whose} is not a directory`;
  const leaves = leavesRoot(root, dirFd, name) ? " that leaves the root" : "";
  return `${whose} is a symbolic link${leaves}; it is not followed`;
}

/** The handle on the root itself: the operator's given root is trusted as named (links in it are theirs). */
export function openRoot(root: string): number {
  return openSync(root, O_PATH | constants.O_DIRECTORY);
}

export type Opened = { fd: number } | { absent: true } | { problem: string };

/** How a directory made on the way is made: its mode and, when given, its owner. */
export interface MadeDir {
  mode: number;
  uid?: number;
  gid?: number;
}

/**
 * How missing directories on a walk are made: one mode for every one (the state's own directories, which
 * the umask may narrow), or, for the declared paths, each declared path's own way, set exactly on the handle
 * whatever the umask (parents a file or directory needs: 0755 root:root, or as a `directory` declares them).
 */
export type DirMaker = number | ((path: string) => MadeDir);

/** A directory made just now (through `fd`) set exactly as `make` says for `path`; a plain mode was mkdir's. */
function setMadeOr(fd: number, make: DirMaker, path: string): Opened {
  if (typeof make === "number") return { fd };
  const how = make(path);
  try {
    chmodSync(at(fd), how.mode);
    if (how.uid !== undefined || how.gid !== undefined) chownSync(at(fd), how.uid ?? -1, how.gid ?? -1);
  } catch (e) {
    closeSync(fd);
    throw new Error(`could not set ${path} as made: ${errnoWords((e as NodeJS.ErrnoException).code)}`);
  }
  return { fd };
}

/**
 * Open directory `name` inside handle `dirFd`, never following a link; made as `make` says first when absent
 * and `make` is given. `prefix` (the declared path of `name`) and `path` word a refusal.
 */
export function openChildDir(
  root: string,
  dirFd: number,
  name: string,
  prefix: string,
  path: string,
  make?: DirMaker,
): Opened {
  let madeNow = false;
  for (let tries = 0; ; tries++) {
    let fd: number;
    try {
      fd = openSync(at(dirFd, name), DIR_HANDLE);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOTDIR" || code === "ELOOP")
        return { problem: blocked(root, dirFd, name, prefix, path) };
      // worded with the declared path, never the /proc/self/fd name the walk went through
      if (code !== "ENOENT")
        return { problem: `${prefix} cannot be walked through to ${path}: ${errnoWords(code)}` };
      if (make === undefined) return { absent: true };
      // made, then gone again before it could be opened: someone is racing this walk; it does not chase them
      if (tries >= MAKE_TRIES) throw new PathRefused(`${prefix} keeps changing on the way to ${path}`);
      fd = -1;
    }
    if (fd >= 0) return madeNow && make !== undefined ? setMadeOr(fd, make, prefix) : { fd };
    try {
      // mkdir never follows its last component: a link planted here since is EEXIST, then refused above
      mkdirSync(at(dirFd, name), typeof make === "number" ? make : make?.(prefix).mode);
      madeNow = true;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // worded with the declared path: a full disk or a read-only one says so, never the /proc/self/fd name
      if (code !== "EEXIST") throw new Error(`could not make ${prefix}: ${errnoWords(code)}`);
    }
  }
}

/**
 * A fresh handle on declared directory `dir` under `root`, walked from the root now (what every effect
 * does), missing components made as `make` says when given; `target` (the declared path the walk is for) words
 * a refusal. The caller closes the handle.
 */
export function walkDir(root: string, dir: string, target = dir, make?: DirMaker): Opened {
  const problem = handlesProblem();
  if (problem) return { problem };
  let fd = openRoot(root);
  let prefix = "";
  try {
    for (const name of componentsOf(dir)) {
      prefix = `${prefix}/${name}`;
      const next = openChildDir(root, fd, name, prefix, target, make);
      if (!("fd" in next)) {
        closeSync(fd);
        return next;
      }
      closeSync(fd);
      fd = next.fd;
    }
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  return { fd };
}

/** A fresh handle on the directory of declared `path`, and its last name: an effect's start. Throws PathRefused. */
export function walkParent(root: string, path: string, make?: DirMaker): { dir: number; name: string } {
  const name = basename(path);
  if (!name) throw new PathRefused(`${path} names no entry below the root`);
  const opened = walkDir(root, dirname(path), path, make);
  if ("problem" in opened) throw new PathRefused(opened.problem);
  if ("absent" in opened) throw new PathRefused(`${path}: its directory is missing`);
  return { dir: opened.fd, name };
}

// ---- handles kept for one apply's decisions

/**
 * Directory handles resolved while an apply decides, by root and declared directory. A thousand files in ten
 * directories would otherwise walk the same ten directories a thousand times (the no-op's largest cost).
 * Only decisions (read only) use them: every effect walks from the root afresh, so a directory swapped for a
 * link after it was cached is refused when written, and a read-back sees the declared path as it is then.
 * Closed by `forgetHandles` when an apply starts and ends, and under a directory this host removes.
 */
const kept = new Map<string, number>();
const keyOf = (root: string, dir: string) => `${root}\0${dir}`;

export function forgetHandles(): void {
  for (const fd of kept.values()) closeSync(fd);
  kept.clear();
}

/** Close the kept handles on declared `dir` and below it: this host just removed it. */
export function forgetUnder(root: string, dir: string): void {
  const key = keyOf(root, dir);
  for (const [k, fd] of kept)
    if (k === key || k.startsWith(`${key}/`)) {
      closeSync(fd);
      kept.delete(k);
    }
}

/** A handle on declared directory `dir` for a decision, kept for the apply: the caller never closes it. */
export function keptDir(root: string, dir: string, target: string): Opened {
  const key = keyOf(root, dir);
  const known = kept.get(key);
  if (known !== undefined) return { fd: known };
  const problem = handlesProblem();
  if (problem) return { problem };
  componentsOf(dir);
  // safe to close them all here: a kept handle is only ever used synchronously, and none is held yet
  if (kept.size >= KEPT_DIR_HANDLES_MAX) forgetHandles();
  let opened: Opened;
  if (dir === "/") opened = { fd: openRoot(root) };
  else {
    const parent = keptDir(root, dirname(dir), target);
    if (!("fd" in parent)) return parent;
    opened = openChildDir(root, parent.fd, basename(dir), dir, target);
  }
  if ("fd" in opened) kept.set(key, opened.fd);
  return opened;
}

export { ENTRY_HANDLE };
