// `mesh watch`: reports and heartbeats as they arrive, from nodes this mesh knows. Plain subscriptions (no
// queue group), so it takes nothing from the controllers, and sees only what arrives while it watches. The
// nodes it knows are read once from the bus and then followed by their bucket's own messages: nothing is read
// per message, and a node flooding its heartbeats is held to the same budget as in `mesh up`. Only what the node
// signed is shown as the node's (heard.ts); `up` counts the rest, so it is not counted twice here.

import { flushed } from "../flushed.ts";
import type { Heartbeat, Report } from "../vocabulary/index.ts";
import { parseJsonBytes } from "../vocabulary/index.ts";
import { serialOf, serialOfSeq } from "./fleet.ts";
import { heardFrom, identityOf } from "./heard.ts";
import { Budget } from "./heartbeats.ts";
import type { MeshDir } from "./layout.ts";
import { allNodes, NodeRecord, openState } from "./state.ts";

export type Heard =
  | { kind: "report"; node: string; at: string; serial: number | null; report: Report }
  | {
      kind: "heartbeat";
      node: string;
      at: string;
      /** The serial of the heartbeat's `last` (which names its stream sequence), when this mesh pushed it. */
      serial: number | null;
      heartbeat: Heartbeat;
    };

/** A message on `$KV.mesh-nodes.<n>`: the record as it now is, or null when the node was removed. */
function recordIn(data: Uint8Array): NodeRecord | null {
  const json = parseJsonBytes(data);
  const r = json.ok ? NodeRecord.safeParse(json.value) : null;
  return r?.success ? r.data : null;
}

export async function watch(
  mesh: MeshDir,
  heard: (event: Heard) => void,
  ready: () => void,
  stop: Promise<void>,
): Promise<void> {
  const state = await openState(mesh, { reconnect: true, name: "mesh-host mesh watch" });
  const nodes = new Map<string, NodeRecord>();
  const budget = new Budget();
  state.bus.nc.subscribe(`$KV.${state.nodes.name}.>`, {
    callback: (err, m) => {
      if (err) return;
      const name = m.subject.slice(state.nodes.name.length + 5);
      const record = recordIn(m.data);
      if (record) nodes.set(name, record);
      else nodes.delete(name);
    },
  });
  await flushed(state.bus.nc, "the connection to the bus closed before it took the records' watch");
  for (const r of await allNodes(state)) if (!nodes.has(r.node)) nodes.set(r.node, r);
  const take = (subject: string, data: Uint8Array) => {
    const node = subject.split(".")[2] ?? "";
    const record = nodes.get(node);
    if (!record) return;
    const report = subject.startsWith("mesh.report.");
    if (!report && !budget.take(node)) return;
    const at = new Date().toISOString();
    if (report) {
      const r = heardFrom(node, identityOf(record), data, "report");
      if (r.ok)
        heard({
          kind: "report",
          node,
          at,
          serial: serialOf(record, r.value.declaration.digest),
          report: r.value,
        });
    } else {
      const h = heardFrom(node, identityOf(record), data, "heartbeat");
      if (h.ok) {
        const serial = h.value.last ? serialOfSeq(record, h.value.last.seq) : null;
        heard({ kind: "heartbeat", node, at, serial, heartbeat: h.value });
      }
    }
  };
  for (const subject of ["mesh.report.>", "mesh.heartbeat.>"])
    state.bus.nc.subscribe(subject, { callback: (err, m) => (err ? undefined : take(m.subject, m.data)) });
  await flushed(state.bus.nc, "the connection to the bus closed before it took the fleet's subscriptions");
  ready();
  await stop;
  await state.bus.close();
}
