import type { z } from "zod";

/** Why something was refused: the resource (or "declaration"), the field, a one-line reason. */
export interface Refusal {
  id: string;
  field: string;
  reason: string;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; refusals: Refusal[] };

/** One line a person can act on: `resource "web", field "mode": must be an octal string`. */
export function refusalLine(r: Refusal): string {
  if (r.id === "declaration")
    return r.field ? `declaration field "${r.field}": ${r.reason}` : `declaration: ${r.reason}`;
  return r.field ? `resource "${r.id}", field "${r.field}": ${r.reason}` : `resource "${r.id}": ${r.reason}`;
}

/** zod's issues as refusals of one resource; an unknown key names the key itself as the field. */
export function refusalsFromIssues(
  id: string,
  issues: z.core.$ZodIssue[],
  prefix: (string | number)[] = [],
): Refusal[] {
  return issues.map((issue) => {
    const path = [...prefix, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))];
    if (issue.code === "unrecognized_keys")
      return { id, field: [...path, ...issue.keys].join("."), reason: "unknown field" };
    if (issue.code === "invalid_type" && issue.message.includes("received undefined"))
      return { id, field: path.join("."), reason: "is required" };
    return { id, field: path.join("."), reason: oneLine(issue.message) };
  });
}

export function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim().slice(0, 300);
}
