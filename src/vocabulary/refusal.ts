import type { z } from "zod";
import { printable } from "../printable.ts";

/** Why something was refused: the resource (or "declaration"), the field, a one-line reason. */
export interface Refusal {
  id: string;
  field: string;
  reason: string;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; refusals: Refusal[] };

/** One line a person can act on: `resource "web", field "mode": must be an octal string`. */
export function refusalLine(given: Refusal): string {
  const r = {
    id: printable(given.id, 80),
    field: printable(given.field, 80),
    reason: printable(given.reason, 300),
  };
  if (r.id === "declaration")
    return r.field ? `declaration field "${r.field}": ${r.reason}` : `declaration: ${r.reason}`;
  return r.field ? `resource "${r.id}", field "${r.field}": ${r.reason}` : `resource "${r.id}": ${r.reason}`;
}

/**
 * zod's issues as refusals of one resource: an unknown key names the key itself as the field, said first
 * (a typo'd `contnt` also makes `content` missing, and was hidden behind "(and 1 more)"), with the near
 * field of `schema` it likely meant.
 */
export function refusalsFromIssues(
  id: string,
  issues: z.core.$ZodIssue[],
  prefix: (string | number)[] = [],
  schema?: unknown,
): Refusal[] {
  const refusals = issues.flatMap((issue): Refusal[] => {
    const path = [...prefix, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))];
    if (issue.code === "unrecognized_keys")
      return issue.keys.map((key) => ({
        id,
        field: printable([...path, key].join("."), 80),
        reason: `unknown field${meant(key, path.length === prefix.length ? fieldsOf(schema) : [])}`,
      }));
    if (issue.code === "invalid_type" && issue.message.includes("received undefined"))
      return [{ id, field: printable(path.join("."), 80), reason: "is required" }];
    return [{ id, field: printable(path.join("."), 80), reason: oneLine(printable(issueWords(issue), 300)) }];
  });
  const unknown = (r: Refusal) => r.reason.startsWith("unknown field");
  return [...refusals.filter(unknown), ...refusals.filter((r) => !unknown(r))];
}

/** The top-level fields of an object schema, through the lazy or refined wrapping around it; none when unknown. */
function fieldsOf(schema: unknown): string[] {
  let s = schema as {
    shape?: object;
    _zod?: { def?: { getter?: () => unknown; in?: unknown; innerType?: unknown } };
  };
  for (let depth = 0; s && depth < 4; depth++) {
    if (s.shape) return Object.keys(s.shape);
    const def = s._zod?.def;
    s = (def?.getter?.() ?? def?.in ?? def?.innerType) as typeof s;
  }
  return [];
}

/** `; did you mean "content"?` when one field of `known` is within two edits of `key`; nothing otherwise. */
function meant(key: string, known: string[]): string {
  const near = known
    .map((k) => ({ k, d: editDistance(key, k) }))
    .filter(({ d }) => d <= Math.min(2, Math.floor(key.length / 2)))
    .sort((a, b) => a.d - b.d)[0];
  return near ? `; did you mean "${near.k}"?` : "";
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

const article = (word: string) => (/^[aeiou]/.test(word) ? `an ${word}` : `a ${word}`);

/** zod's issue in our words: what the field must be, and what it was given, never zod's own phrasing. */
export function issueWords(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "invalid_type": {
      const got = /received (\w+)/.exec(issue.message)?.[1];
      const want = issue.expected === "string" ? "string (in quotes)" : issue.expected;
      return `must be ${article(want)}${got ? `, not ${article(got)}` : ""}`;
    }
    case "invalid_value":
      return `must be ${issue.values.map((v) => JSON.stringify(v)).join(" or ")}`;
    case "too_small":
      // a bound of ours says its own words ("must name a program"); zod's said "must be at least 1 items"
      if (!issue.message.startsWith("Too small")) return issue.message;
      if (Number(issue.minimum) === 1 && sizeUnit(issue.origin)) return "must not be empty";
      return bound("at least", issue.minimum, issue.origin);
    case "too_big":
      if (!issue.message.startsWith("Too big")) return issue.message;
      return bound("at most", issue.maximum, issue.origin);
    case "invalid_union":
      return "is none of the forms this field takes";
    case "invalid_format":
      if (!issue.message.startsWith("Invalid")) return issue.message;
      return issue.format === "regex"
        ? "is not in the form this field takes"
        : `is not a valid ${issue.format}`;
    default:
      // a refinement of ours says its own words; zod's generic "Invalid input" says too little
      return issue.message.startsWith("Invalid input") ? "is not valid here" : issue.message;
  }
}

function sizeUnit(origin: string): string {
  if (origin === "string") return " characters long";
  if (origin === "array" || origin === "set") return " entries";
  return "";
}

/** "must be at most 63 characters long", "must have at least 2 entries", "must be at least 1". */
function bound(which: string, n: number | bigint, origin: string): string {
  const list = origin === "array" || origin === "set";
  return `must ${list ? "have" : "be"} ${which} ${n}${sizeUnit(origin)}`;
}

export function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim().slice(0, 300);
}
