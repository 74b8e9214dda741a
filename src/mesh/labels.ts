// A node's labels (the operator's word: `node add --label`, `node label NAME k=v… k-`) and its facts (the node's
// own, said at enrolment), the fields a selector reads. A fact is what a node says of itself: a node can lie
// about its own, so what carries secrets should be chosen by labels. Label keys never take a fact's name, so a
// node can never stand in for a label by what it says.
import { type MeshDir, MeshRefused } from "./layout.ts";
import { keyProblem, parseSelector, selects, valueProblem } from "./selector.ts";
import { allNodes, changeNode, type NodeRecord, type State, withState } from "./state.ts";

/** What a node says of itself at enrolment (and nothing else a selector reads from it). */
export const FACT_KEYS = [
  "os",
  "kind",
  "arch",
  "kernel",
  "hostname",
  "version",
  "cpus",
  "memory_mb",
] as const;

export interface LabelChange {
  set: Record<string, string>;
  remove: string[];
}

/** `k=v` sets, `k-` removes; each key and value as Kubernetes takes it, never a fact's name, never twice. */
export function parseLabels(words: string[]): LabelChange {
  const change: LabelChange = { set: {}, remove: [] };
  const seen = new Set<string>();
  for (const w of words) {
    const eq = w.indexOf("=");
    const key = eq >= 0 ? w.slice(0, eq) : w.endsWith("-") ? w.slice(0, -1) : null;
    if (key === null)
      throw new MeshRefused(`label "${w.slice(0, 80)}" is neither KEY=VALUE nor KEY- (to remove it)`);
    const problem = keyProblem(key) ?? (eq >= 0 ? valueProblem(w.slice(eq + 1)) : null);
    if (problem) throw new MeshRefused(`label ${problem}`);
    if ((FACT_KEYS as readonly string[]).includes(key))
      throw new MeshRefused(
        `label "${key}" is a fact the node reports (${FACT_KEYS.join(", ")}): choose another key`,
      );
    if (seen.has(key)) throw new MeshRefused(`label "${key}" is given twice`);
    seen.add(key);
    if (eq >= 0) change.set[key] = w.slice(eq + 1);
    else change.remove.push(key);
  }
  return change;
}

export function relabelled(labels: Record<string, string>, change: LabelChange): Record<string, string> {
  const next = { ...labels, ...change.set };
  for (const k of change.remove) delete next[k];
  return next;
}

/** Change a node's labels (compare-and-set on its record); its labels as they now are. */
export async function labelNode(
  mesh: MeshDir,
  name: string,
  change: LabelChange,
): Promise<Record<string, string>> {
  return await withState(mesh, (state) =>
    changeNode(state, name, (record) => {
      const labels = relabelled(record.labels, change);
      return { value: { ...record, labels }, result: labels };
    }),
  );
}

/** The fields a selector reads: the node's facts (only the known ones), then its labels (never the same keys). */
export function fieldsOf(record: NodeRecord): Record<string, string> {
  const facts: Record<string, string> = {};
  for (const k of FACT_KEYS) {
    const v = record.facts?.[k];
    if (typeof v === "string") facts[k] = v;
  }
  return { ...facts, ...record.labels };
}

/** The enrolled nodes (not moved away) a selector picks, by name; a refusal when it picks none. */
export async function selectedNodes(state: State, where: string): Promise<string[]> {
  const requirements = parseSelector(where);
  const picked = (await allNodes(state))
    .filter((r) => r.keys && !r.moved_to && selects(requirements, fieldsOf(r)))
    .map((r) => r.node);
  if (!picked.length) throw new MeshRefused(`--where "${where.slice(0, 80)}" selects no enrolled node`);
  return picked;
}

/** Every node (enrolled or not) a selector picks: what `nodes --where` and `watch --where` show. */
export function matchingNodes(records: NodeRecord[], where: string): Set<string> {
  const requirements = parseSelector(where);
  return new Set(records.filter((r) => selects(requirements, fieldsOf(r))).map((r) => r.node));
}
