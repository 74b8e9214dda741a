// `--where SELECTOR`: Kubernetes' label-selector grammar over a node's labels (the operator's word) and its
// facts (the node's own): `role=web`, `role==web`, `os!=android`, `tier in (a,b)`, `tier notin (a)`,
// `canary`, `!canary`, requirements joined by commas (and). As in Kubernetes, `!=` and `notin` also match a
// node without the key. A label and a fact never share a name (labels.ts refuses such a label), so which one a
// key reads is never in doubt. A selector that does not parse is one line naming what is wrong.
import { printable } from "../printable.ts";
import { MeshRefused } from "./layout.ts";

export type Requirement =
  | { op: "exists" | "absent"; key: string }
  | { op: "in" | "notin"; key: string; values: string[] };

const KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** A label key or value as Kubernetes takes it, or why not. */
export function keyProblem(key: string): string | null {
  const name = key.includes("/") ? key.slice(key.indexOf("/") + 1) : key;
  if (!KEY.test(key) || name.length > 63 || key.length > 253)
    return `"${shown(key)}" is not a label key (letters, digits, - _ . inside, at most 63; an optional DNS prefix and /)`;
  return null;
}

export function valueProblem(value: string): string | null {
  if (!VALUE.test(value) || value.length > 63)
    return `"${shown(value)}" is not a label value (letters, digits, - _ . inside, at most 63, or empty)`;
  return null;
}

const shown = (s: string) => printable(s, 80);

/** The requirements, split on the commas outside parentheses. */
function parts(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const c of selector) {
    if (c === "(") depth++;
    if (c === ")") depth--;
    if (depth < 0) throw new MeshRefused(`--where "${shown(selector)}": a ")" with no "(" before it`);
    if (c === "," && depth === 0) {
      out.push(cur.trim());
      cur = "";
    } else cur += c;
  }
  if (depth > 0) throw new MeshRefused(`--where "${shown(selector)}": a "(" is never closed`);
  out.push(cur.trim());
  return out;
}

function requirement(text: string, selector: string): Requirement {
  const bad = (why: string): never => {
    throw new MeshRefused(`--where "${shown(selector)}": ${why}`);
  };
  if (!text) bad("an empty requirement (two commas, or one at an end)");
  const set = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(text);
  if (set) {
    const values = set[3]!.split(",").map((v) => v.trim());
    if (!values.length || values.some((v) => v === ""))
      bad(`"${shown(text)}": the set needs values, separated by commas`);
    return {
      op: set[2] as "in" | "notin",
      key: checked(set[1]!, bad),
      values: values.map((v) => value(v, bad)),
    };
  }
  const eq = /^([^=!\s]+)\s*(==|=|!=)\s*(.*)$/.exec(text);
  if (eq)
    return {
      op: eq[2] === "!=" ? "notin" : "in",
      key: checked(eq[1]!, bad),
      values: [value(eq[3]!.trim(), bad)],
    };
  if (text.startsWith("!")) return { op: "absent", key: checked(text.slice(1).trim(), bad) };
  if (/\s/.test(text)) bad(`"${shown(text)}": an operator is missing (=, ==, !=, in, notin)`);
  return { op: "exists", key: checked(text, bad) };
}

function checked(key: string, bad: (why: string) => never): string {
  const problem = keyProblem(key);
  return problem ? bad(problem) : key;
}

function value(v: string, bad: (why: string) => never): string {
  const problem = valueProblem(v);
  return problem ? bad(problem) : v;
}

/** The selector's requirements, or a refusal naming what is wrong. */
export function parseSelector(selector: string): Requirement[] {
  if (!selector.trim())
    throw new MeshRefused("--where needs a selector (role=web, os!=android, tier in (a,b), !canary)");
  return parts(selector).map((p) => requirement(p, selector));
}

/** Whether a node with these keys and values meets every requirement. */
export function selects(requirements: Requirement[], fields: Record<string, string>): boolean {
  return requirements.every((r) => meets(r, Object.hasOwn(fields, r.key) ? fields[r.key]! : null));
}

/** One requirement against the key's value (null: the node has no such key). */
function meets(r: Requirement, value: string | null): boolean {
  if (r.op === "exists") return value !== null;
  if (r.op === "absent") return value === null;
  if (r.op === "in") return value !== null && r.values.includes(value);
  return r.op === "notin" && (value === null || !r.values.includes(value));
}
