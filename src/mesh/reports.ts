// `mesh report NODE [--serial N]`: a node's full report (every step and its detail, holds, refusals, notes) read
// from the REPORTS stream, which keeps a month. The newest by default; with a serial, the newest report of the
// declaration pushed with it (the record remembers the last pushes' serials and digests).
import type { MsgRequest } from "@nats-io/jetstream";
import { REPORT_READ_MS } from "../defaults.ts";
import { parseJsonBytes, type Report, Report as ReportSchema, reportSubject } from "../vocabulary/index.ts";
import { type Bus, jsCall } from "./bus.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";

function parsed(data: Uint8Array, node: string): Report | null {
  const json = parseJsonBytes(data);
  const r = json.ok ? ReportSchema.safeParse(json.value) : null;
  return r?.success && r.data.node === node ? r.data : null;
}

/** The node's newest report, or the newest of the declaration pushed with `serial`; null when there is none. */
export async function reportOf(
  mesh: MeshDir,
  bus: Bus,
  node: string,
  serial: number | null,
): Promise<{ report: Report; serial: number | null } | null> {
  const record = mesh.known(node);
  if (serial === null) {
    const sm = await jsCall(() =>
      bus.jsm.streams.getMessage("REPORTS", { last_by_subj: reportSubject(node) }),
    ).catch(() => null);
    const report = sm ? parsed(sm.data, node) : null;
    if (!report) return null;
    return {
      report,
      serial: record.pushes.find((p) => p.digest === report.declaration.digest)?.serial ?? null,
    };
  }
  const push = record.pushes.find((p) => p.serial === serial);
  if (!push)
    throw new MeshRefused(
      `node ${node} has no push with serial ${serial} among the ${record.pushes.length} the mesh remembers (${record.pushes.map((p) => p.serial).join(", ") || "none"})`,
    );
  const report = await newestWith(bus, node, push.digest);
  return report ? { report, serial } : null;
}

/**
 * Every report the stream keeps for the node, oldest first, one direct read at a time (the next message on its
 * subject): the newest naming `digest`. No consumer is made for it; REPORT_READ_MS bounds the whole read.
 */
async function newestWith(bus: Bus, node: string, digest: string): Promise<Report | null> {
  const deadline = Date.now() + REPORT_READ_MS;
  let found: Report | null = null;
  let seq = 1;
  while (Date.now() < deadline) {
    // the server's message get takes next_by_subj (2.9 on); the client's type names only seq and last_by_subj
    const next = { seq, next_by_subj: reportSubject(node) } as unknown as MsgRequest;
    const sm = await jsCall(() => bus.jsm.streams.getMessage("REPORTS", next)).catch(() => null);
    if (!sm) break;
    const r = parsed(sm.data, node);
    if (r?.declaration.digest === digest) found = r;
    seq = sm.seq + 1;
  }
  return found;
}
