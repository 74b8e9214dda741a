// The parent directories a file or a directory needs and the machine lacks: made 0755 root:root (or as a
// declared `directory` says), named in the plan, recorded as made by each resource under them, and removed
// with the last of those undeclared, if empty. Found there, they are never recorded. They were made with
// the child's mode (a 0700 directory made its parents 0700), the plan did not show them, nothing removed them.

import { DEFAULT_DIR_MODE } from "../../defaults.ts";
import { entryAt, type MadeDir, octal, parseMode, removeDirAt, resolveIds } from "../../system/index.ts";
import { type DirectoryResource, pathsOf } from "../../vocabulary/index.ts";
import type { DecideContext } from "../types.ts";

/** The ancestors of `path` below the root ("/a/b/c" → ["/a", "/a/b"]), outermost first. */
function ancestorsOf(path: string): string[] {
  const parts = path.split("/").filter(Boolean);
  return parts.slice(0, -1).map((_, i) => `/${parts.slice(0, i + 1).join("/")}`);
}

/** The ancestors of `path` absent now (outermost first): what writing it makes. */
export function missingParents(root: string, path: string): string[] {
  const all = ancestorsOf(path);
  const first = all.findIndex((p) => entryAt(root, p) === null);
  return first < 0 ? [] : all.slice(first);
}

const declaredDir = (ctx: DecideContext, path: string): DirectoryResource | undefined =>
  ctx.declared?.find((r): r is DirectoryResource => r.type === "directory" && r.path === path);

/** How the host makes parent `path`: as the `directory` declaring it says, or 0755 root:root. */
function madeAs(ctx: DecideContext, path: string): MadeDir {
  const { root, rootless } = ctx.ports;
  const declared = declaredDir(ctx, path);
  const mode = parseMode(declared?.mode) ?? DEFAULT_DIR_MODE;
  if (rootless) return { mode };
  if (!declared) return { mode, uid: 0, gid: 0 };
  // an owner that does not resolve refuses that directory's own step; made here, it is root's meanwhile
  const ids = resolveIds(root, declared.owner, declared.group);
  return typeof ids === "string" ? { mode, uid: 0, gid: 0 } : { mode, ...ids };
}

/** The walk's maker for the missing parents of a declared path: each made exactly as `madeAs` says. */
export function parentMaker(ctx: DecideContext): (path: string) => MadeDir {
  return (path) => madeAs(ctx, path);
}

/**
 * Of `missing`, the parents resource `id` records as made for it: not one a `directory` declares (that
 * resource is its maker). Two files in one new directory both record it: whichever goes last removes it.
 */
export function madeParents(ctx: DecideContext, missing: string[]): string[] {
  return missing.filter((p) => !declaredDir(ctx, p));
}

/**
 * The plan's words for the parents `id` makes: ", making /opt, /opt/app 0755 root:root", or nothing. A
 * parent a path declared before `id` also lies under is that one's to say, so the plan says each once.
 */
export function makingWords(ctx: DecideContext, id: string, parents: string[]): string {
  const declared = ctx.declared ?? [];
  const index = declared.findIndex((r) => r.id === id);
  const earlier = declared.slice(0, Math.max(index, 0)).flatMap(pathsOf);
  const said = parents.filter((p) => !earlier.some((e) => e === p || e.startsWith(`${p}/`)));
  if (!said.length) return "";
  return `, making ${said.join(", ")} ${octal(DEFAULT_DIR_MODE)}${ctx.ports.rootless ? "" : " root:root"}`;
}

/** The parents recorded as made, kept across applies: what was made before and what is made now. */
export const keptParents = (before: string[] | undefined, now: string[]): string[] | undefined => {
  const all = [...new Set([...(before ?? []), ...now])].sort();
  return all.length ? all : undefined;
};

/** The plan's words for the parents a removal takes with it when empty. */
export function removingWords(parents: string[] | undefined, ctx: DecideContext): string {
  const gone = removable(parents, ctx);
  return gone.length ? `; then ${gone.join(", ")} if empty (made for it)` : "";
}

/** The recorded parents a removal may take (innermost first): none that is declared now. */
function removable(parents: string[] | undefined, ctx: DecideContext): string[] {
  return (parents ?? []).filter((p) => !ctx.declaredPaths.has(p)).sort((a, b) => b.length - a.length);
}

/** Remove the recorded parents that are empty, innermost first; the words the report adds. */
export function removeParents(parents: string[] | undefined, ctx: DecideContext): string {
  const removed: string[] = [];
  for (const p of removable(parents, ctx)) {
    const r = removeDirAt(ctx.ports.root, p);
    if (r === "not-empty") {
      // what holds something keeps its own parents too
      const left = `${p} left: it holds what was not made with it`;
      return removed.length ? `; removed ${removed.join(", ")}; ${left}` : `; ${left}`;
    }
    if (r === "removed") removed.push(p);
  }
  return removed.length ? `; removed ${removed.join(", ")} (made for it)` : "";
}
