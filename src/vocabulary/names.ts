// The one rule for names and paths: checked on arrival and again before every removal.
import * as z from "zod";
import { printable } from "../printable.ts";

/**
 * `net.isIP`, with node:net loaded at its first call rather than at start-up: only a declaration that names an
 * address (containers, overlay) pays for the module and the stream machinery it brings (issue 22).
 */
export function isIP(address: string): number {
  return process.getBuiltinModule("node:net").isIP(address);
}

const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const NAME_RULE =
  'a name starts with a lower-case letter or a digit and holds only those, ".", "_" and "-", at most 63 characters';

/** Why `name` is not a valid resource/process/unit/container name, or null when it is. */
export function nameProblem(name: unknown): string | null {
  if (typeof name !== "string") return "must be a string";
  if (name === "." || name === "..") return `"${name}" is not a name`;
  // the value itself, and the rule in words: a bare regex told nobody what was wrong with what they wrote
  if (!NAME.test(name)) return `${JSON.stringify(printable(name, 64))} is not a name: ${NAME_RULE}`;
  return null;
}

/** Why `path` is not an absolute, normalised path, or null when it is. */
export function pathProblem(path: unknown): string | null {
  if (typeof path !== "string") return "must be a string";
  if (path.includes("\0")) return "contains a NUL byte";
  if (!path.startsWith("/")) return "must be absolute";
  if (path === "/") return "must not be the root itself";
  if (path.length > 4096) return "is longer than 4096 characters";
  if (path.endsWith("/")) return "must not end with /";
  if (path.includes("//")) return "must not contain //";
  for (const segment of path.split("/").slice(1)) {
    if (segment === "." || segment === "..") return `must not contain a "${segment}" segment`;
  }
  return null;
}

/** A string schema refused in `problem`'s own words: how every rule here (and each type's own) meets zod. */
export const checkedString = (problem: (v: string) => string | null) =>
  z.string().superRefine((v, ctx) => {
    const p = problem(v);
    if (p) ctx.addIssue({ code: "custom", message: p });
  });

// built on first use, as every schema is (resources.ts says why)
export const Name = z.lazy(() => checkedString(nameProblem));
export const AbsPath = z.lazy(() => checkedString(pathProblem));
