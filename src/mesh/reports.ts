// `mesh report NODE [--serial N]`: a node's full report (every step and its detail, holds, refusals, notes) read
// from the REPORTS stream, which keeps a month. The newest by default; with a serial, the newest report of the
// declaration pushed with it (the record remembers the last pushes' serials and digests). Only a report signed
// by the node's enrolled identity key is the node's (heard.ts): anything else on its subject is passed over.
import type { MsgRequest } from "@nats-io/jetstream";
import { REPORT_READ_MS } from "../defaults.ts";
import { type Report, reportSubject } from "../vocabulary/index.ts";
import { type Bus, jsCall } from "./bus.ts";
import { heardFrom, identityOf } from "./heard.ts";
import { MeshRefused } from "./layout.ts";
import { knownNode, type State } from "./state.ts";

/** The node's newest report, or the newest of the declaration pushed with `serial`; null when there is none. */
export async function reportOf(
  state: State,
  node: string,
  serial: number | null,
): Promise<{ report: Report; serial: number | null } | null> {
  const record = (await knownNode(state, node)).value;
  const identity = identityOf(record);
  if (serial === null) {
    const report = await newestWith(state.bus, node, identity, null);
    if (!report) return null;
    const pushed = record.pushes.find((p) => p.digest === report.declaration.digest);
    return { report, serial: pushed?.serial ?? null };
  }
  const push = record.pushes.find((p) => p.serial === serial);
  if (!push)
    throw new MeshRefused(
      `node ${node} has no push with serial ${serial} among the ${record.pushes.length} the mesh remembers (${record.pushes.map((p) => p.serial).join(", ") || "none"})`,
    );
  const report = await newestWith(state.bus, node, identity, push.digest);
  return report ? { report, serial } : null;
}

/**
 * Every report the stream keeps for the node, oldest first, one direct read at a time (the next message on its
 * subject): the newest the node signed (naming `digest`, when one is given). No consumer is made for it;
 * REPORT_READ_MS bounds the whole read.
 */
async function newestWith(
  bus: Bus,
  node: string,
  identity: string | null,
  digest: string | null,
): Promise<Report | null> {
  const deadline = Date.now() + REPORT_READ_MS;
  let found: Report | null = null;
  let seq = 1;
  while (Date.now() < deadline) {
    // the server's message get takes next_by_subj (2.9 on); the client's type names only seq and last_by_subj
    const next = { seq, next_by_subj: reportSubject(node) } as unknown as MsgRequest;
    const sm = await jsCall(() => bus.jsm.streams.getMessage("REPORTS", next)).catch(() => null);
    if (!sm) break;
    const r = heardFrom(node, identity, sm.data, "report");
    if (r.ok && (digest === null || r.value.declaration.digest === digest)) found = r.value;
    seq = sm.seq + 1;
  }
  return found;
}
