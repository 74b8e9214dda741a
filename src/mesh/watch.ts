// `mesh watch`: reports and heartbeats as they arrive, from nodes this mesh knows. Plain subscriptions (no
// queue group), so it takes nothing from the controllers, and sees only what arrives while it watches. The
// nodes it knows are read once from the bus and then followed by their bucket's own messages: nothing is read
// per message, and a node flooding its heartbeats is held to the same budget as in `mesh up`.
import { Heartbeat, parseJsonBytes, Report } from "../vocabulary/index.ts";
import { serialOf, serialOfSeq } from "./fleet.ts";
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
  await state.bus.nc.flush();
  for (const r of await allNodes(state)) if (!nodes.has(r.node)) nodes.set(r.node, r);
  const take = (subject: string, data: Uint8Array) => {
    const node = subject.split(".")[2] ?? "";
    const record = nodes.get(node);
    if (!record) return;
    const report = subject.startsWith("mesh.report.");
    if (!report && !budget.take(node)) return;
    const json = parseJsonBytes(data);
    if (!json.ok) return;
    const at = new Date().toISOString();
    if (report) {
      const r = Report.safeParse(json.value);
      if (r.success && r.data.node === node)
        heard({
          kind: "report",
          node,
          at,
          serial: serialOf(record, r.data.declaration.digest),
          report: r.data,
        });
    } else {
      const h = Heartbeat.safeParse(json.value);
      if (h.success && h.data.node === node) {
        const serial = h.data.last ? serialOfSeq(record, h.data.last.seq) : null;
        heard({ kind: "heartbeat", node, at, serial, heartbeat: h.data });
      }
    }
  };
  for (const subject of ["mesh.report.>", "mesh.heartbeat.>"])
    state.bus.nc.subscribe(subject, { callback: (err, m) => (err ? undefined : take(m.subject, m.data)) });
  await state.bus.nc.flush();
  ready();
  await stop;
  await state.bus.close();
}
