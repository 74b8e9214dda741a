// `mesh watch`: reports and heartbeats as they arrive, from nodes this mesh knows. A plain subscription, so it
// takes nothing from `up`'s durable reader, and sees only what arrives while it watches.
import { Heartbeat, parseJsonBytes, Report } from "../vocabulary/index.ts";
import { connectBus } from "./bus.ts";
import { serialOf, serialOfSeq } from "./fleet.ts";
import type { MeshDir } from "./layout.ts";

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

export async function watch(
  mesh: MeshDir,
  heard: (event: Heard) => void,
  ready: () => void,
  stop: Promise<void>,
): Promise<void> {
  const bus = await connectBus(mesh, { reconnect: true, name: "mesh-host mesh watch" });
  const take = (subject: string, data: Uint8Array) => {
    const node = subject.split(".")[2] ?? "";
    const record = mesh.node(node);
    const json = parseJsonBytes(data);
    if (!record || !json.ok) return;
    const at = new Date().toISOString();
    if (subject.startsWith("mesh.report.")) {
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
    bus.nc.subscribe(subject, { callback: (err, m) => (err ? undefined : take(m.subject, m.data)) });
  await bus.nc.flush();
  ready();
  await stop;
  await bus.close();
}
