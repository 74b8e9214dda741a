// `mesh watch`: reports and heartbeats as they arrive, from nodes this mesh knows. A plain subscription, so it
// takes nothing from `up`'s durable reader, and sees only what arrives while it watches. Only what the node
// signed is shown as the node's (heard.ts); `up` counts the rest, so it is not counted twice here.
import type { Heartbeat, Report } from "../vocabulary/index.ts";
import { connectBus } from "./bus.ts";
import { serialOf } from "./fleet.ts";
import { heardFrom } from "./heard.ts";
import type { MeshDir } from "./layout.ts";

export type Heard =
  | { kind: "report"; node: string; at: string; serial: number | null; report: Report }
  | { kind: "heartbeat"; node: string; at: string; heartbeat: Heartbeat };

export async function watch(
  mesh: MeshDir,
  heard: (event: Heard) => void,
  ready: () => void,
  stop: Promise<void>,
): Promise<void> {
  const bus = await connectBus(mesh, { reconnect: true, name: "mesh-host mesh watch" });
  const take = (subject: string, data: Uint8Array) => {
    const at = new Date().toISOString();
    if (subject.startsWith("mesh.report.")) {
      const r = heardFrom(mesh, subject, data, "report");
      if (r.ok)
        heard({
          kind: "report",
          node: r.node,
          at,
          serial: serialOf(r.record, r.value.declaration.digest),
          report: r.value,
        });
    } else {
      const h = heardFrom(mesh, subject, data, "heartbeat");
      if (h.ok) heard({ kind: "heartbeat", node: h.node, at, heartbeat: h.value });
    }
  };
  for (const subject of ["mesh.report.>", "mesh.heartbeat.>"])
    bus.nc.subscribe(subject, { callback: (err, m) => (err ? undefined : take(m.subject, m.data)) });
  await bus.nc.flush();
  ready();
  await stop;
  await bus.close();
}
