// A push that drops resources says so first: what the node last had from this mesh (the record's last body, the
// declaration as it was pushed) against what FILE declares for it. A resource whose id is gone, or whose id now
// names another type, is removed by the node's apply (undeclared: given back, stopped, deleted). Without
// `--allow-removals` the push is refused before anything is sent or any serial taken; `mesh plan` shows each.
import { REMOVALS_NAMED } from "../defaults.ts";
import { MeshRefused } from "./layout.ts";
import type { NodeRecord } from "./state.ts";

interface Named {
  id: string;
  type: string;
}

function resourcesOf(body: Record<string, unknown> | null): Named[] {
  const list = Array.isArray(body?.resources) ? body.resources : [];
  return list.flatMap((r) =>
    typeof r === "object" && r !== null && typeof r.id === "string" && typeof r.type === "string"
      ? [{ id: r.id, type: r.type }]
      : [],
  );
}

/** What the new body leaves out of the node's last one: each `id (type)`. */
export function droppedBy(record: NodeRecord, next: Record<string, unknown>): Named[] {
  const now = new Map(resourcesOf(next).map((r) => [r.id, r.type]));
  return resourcesOf(record.last_body).filter((r) => now.get(r.id) !== r.type);
}

/** Refused, naming each node and what it would lose (a few each), unless removals are allowed. */
export function refuseRemovals(dropped: { node: string; gone: Named[] }[]): void {
  const losing = dropped.filter((d) => d.gone.length);
  if (!losing.length) return;
  const said = losing.map((d) => {
    const names = d.gone.slice(0, REMOVALS_NAMED).map((r) => `${r.id} (${r.type})`);
    const more = d.gone.length > REMOVALS_NAMED ? ` and ${d.gone.length - REMOVALS_NAMED} more` : "";
    return `${d.node} loses ${names.join(", ")}${more}`;
  });
  throw new MeshRefused(
    `this declaration removes what the node last had: ${said.join("; ")}. Give --allow-removals to remove it (mesh plan shows each node's plan)`,
  );
}
