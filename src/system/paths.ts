// Where a declared path lands under --root, and the checks every write and removal makes first.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathProblem } from "../vocabulary/index.ts";
import { forgetHandles, handlesProblem, keptDir } from "./walk.ts";

/** The machine path for a declared path: `root` + `path`. */
export function underRoot(root: string, path: string): string {
  return root === "/" ? path : join(root, path);
}

/** What one apply resolved is its own: the next looks at the machine afresh (the walk's kept handles closed). */
export function forgetResolved(): void {
  forgetHandles();
}

/**
 * Why writing or removing the declared `path` under `root` is unsafe, or null: the path rule again, then
 * every existing parent walked from the root with no link followed (a link in the way is refused, wherever
 * it points). The effect itself walks again (src/system): this is the plan's early word, not the guard.
 */
export function placeProblem(root: string, path: string): string | null {
  const rule = pathProblem(path);
  if (rule) return `path ${rule}`;
  const parent = keptDir(root, dirname(path), path);
  return "problem" in parent ? parent.problem : null;
}

/**
 * Whether a problem with declared `path` refuses the whole declaration rather than failing its one step: the
 * path breaks the rule, or this host can act on no path at all (no /proc). What is on the machine (a link, a
 * file where a directory must be) fails only the resource it is in the way of: anyone who may write one
 * directory on one declared path could otherwise stop the mesh managing everything else.
 */
export function placeRefuses(path: string): boolean {
  return pathProblem(path) !== null || handlesProblem() !== null;
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

/** The field a `resolveIds` refusal is about: it names the user (`owner`) or the group (`group`) it could not find. */
export function idsField(reason: string): "owner" | "group" {
  return reason.startsWith("group") ? "group" : "owner";
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
