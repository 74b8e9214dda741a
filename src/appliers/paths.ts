// Where a declared path lands under --root, and the checks every write and removal makes first.
import { readFileSync, realpathSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import { pathProblem } from "../vocabulary/index.ts";

/** The machine path for a declared path: `root` + `path`. */
export function underRoot(root: string, path: string): string {
  return root === "/" ? path : join(root, path);
}

function inside(base: string, candidate: string): boolean {
  return base === "/" || candidate === base || candidate.startsWith(base + sep);
}

/**
 * Directories resolved during one apply, by machine path. A thousand files in ten directories would otherwise
 * ask the kernel to resolve the same ten parents a thousand times (the no-op's largest cost). Cleared by
 * `forgetResolved` when an apply starts and ends: the mesh itself never turns a directory into a link, and a
 * hand that does so mid-apply could as well between any check and its write.
 */
const resolvedDirs = new Map<string, string>();

export function forgetResolved(): void {
  resolvedDirs.clear();
}

/** The nearest existing ancestor of `abs`, resolved through any links (the kernel's realpath: one call). */
function resolvedAncestor(abs: string): string {
  let dir = dirname(abs);
  for (;;) {
    const known = resolvedDirs.get(dir);
    if (known !== undefined) return known;
    try {
      const real = realpathSync.native(dir);
      resolvedDirs.set(dir, real);
      return real;
    } catch {
      const up = dirname(dir);
      if (up === dir) return dir;
      dir = up;
    }
  }
}

const realRoots = new Map<string, string>();

/** The root resolved once: it is the machine's given root and does not move under a running host. */
function realRootOf(root: string): string {
  let real = realRoots.get(root);
  if (real === undefined) {
    real = realpathSync.native(root);
    realRoots.set(root, real);
  }
  return real;
}

/**
 * Why writing or removing the declared `path` under `root` is unsafe, or null: the path rule again,
 * then the parent, resolved through links, must still be inside the root.
 */
export function placeProblem(root: string, path: string): string | null {
  const rule = pathProblem(path);
  if (rule) return `path ${rule}`;
  const realRoot = realRootOf(root);
  const parent = resolvedAncestor(underRoot(root, path));
  if (!inside(realRoot, parent)) return `a parent of ${path} is a symbolic link that leaves the root`;
  return null;
}

export interface Ids {
  uid?: number;
  gid?: number;
}

/** Numeric ids for `owner`/`group`, looked up in the root's own passwd and group files. */
export function resolveIds(root: string, owner?: string | number, group?: string | number): Ids | string {
  const uid = owner === undefined ? undefined : lookup(root, "passwd", owner);
  if (typeof uid === "string") return uid;
  const gid = group === undefined ? undefined : lookup(root, "group", group);
  if (typeof gid === "string") return gid;
  return { uid, gid };
}

function lookup(root: string, file: "passwd" | "group", who: string | number): number | string {
  if (typeof who === "number") return who;
  if (/^[0-9]+$/.test(who)) return Number(who);
  let text = "";
  try {
    text = readFileSync(underRoot(root, `/etc/${file}`), "utf8");
  } catch {
    // no such file: the name cannot be found
  }
  for (const line of text.split("\n")) {
    const [name, , id] = line.split(":");
    if (name === who && id !== undefined) return Number(id);
  }
  return `${file === "passwd" ? "user" : "group"} "${who}" does not exist on this machine`;
}

export function octal(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, "0")}`;
}

export function parseMode(mode: string | undefined): number | undefined {
  return mode === undefined ? undefined : Number.parseInt(mode, 8);
}

/** What a report says when owner/group were declared but the host runs without root (Android, a user's shell). */
export function ownerIgnored(rootless: boolean, wanted: { owner?: unknown; group?: unknown }): string {
  return rootless && (wanted.owner !== undefined || wanted.group !== undefined)
    ? "; owner/group ignored: running without root"
    : "";
}
