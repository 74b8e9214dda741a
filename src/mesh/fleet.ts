// The fleet view: what `up` heard last from each node (fleet.json), and the rows `mesh nodes` shows from it.
import { FLEET_CELL_CHARS } from "../defaults.ts";
import { type Heartbeat, printable, type Report } from "../vocabulary/index.ts";
import type { Fleet, FleetEntry, NodeRecord } from "./layout.ts";

function entryOf(fleet: Fleet, node: string): FleetEntry {
  fleet.nodes[node] ??= { heartbeat: null, report: null };
  return fleet.nodes[node];
}

export function heardHeartbeat(fleet: Fleet, hb: Heartbeat, at = new Date()): void {
  entryOf(fleet, hb.node).heartbeat = {
    at: at.toISOString(),
    version: hb.version,
    uptime_s: hb.uptime_s,
    confirmed: hb.confirmed,
  };
}

/** A message on the node's subjects that was not its own (heard.ts): counted, nothing else of it kept. */
export function heardDropped(fleet: Fleet, node: string): void {
  const entry = entryOf(fleet, node);
  entry.dropped = (entry.dropped ?? 0) + 1;
}

/** The serial a report answers, from the pushes the node's record remembers (a report names only its digest). */
export function serialOf(record: NodeRecord | null, digest: string): number | null {
  return record?.pushes.find((p) => p.digest === digest)?.serial ?? null;
}

export function heardReport(fleet: Fleet, report: Report, record: NodeRecord | null, at = new Date()): void {
  const entry = entryOf(fleet, report.node);
  // a refused declaration's report names no mode: the node's mode is still what it last said
  const mode = report.mode ?? entry.report?.mode ?? null;
  entry.report = {
    at: at.toISOString(),
    outcome: report.outcome,
    seq: report.declaration.seq,
    digest: report.declaration.digest,
    serial: serialOf(record, report.declaration.digest),
    mode,
  };
}

export interface FleetRow {
  node: string;
  enrolled: boolean;
  mode: string | null;
  version: string | null;
  heartbeat_age_s: number | null;
  report: { outcome: string; serial: number | null; seq: number; age_s: number } | null;
  confirmed: boolean | null;
  moved_to: string | null;
  /** Messages on its subjects dropped as not signed by its identity key. */
  dropped: number;
}

const ageOf = (iso: string, now: number) => Math.max(0, Math.round((now - Date.parse(iso)) / 1000));

/** One row a node, the silent first (never heard, then the longest silence), then by name. */
export function fleetRows(records: NodeRecord[], fleet: Fleet, now = Date.now()): FleetRow[] {
  const rows = records.map((r): FleetRow => {
    const e = fleet.nodes[r.node];
    const hb = e?.heartbeat ?? null;
    const rep = e?.report ?? null;
    return {
      node: r.node,
      enrolled: r.keys !== null,
      mode: rep?.mode ?? null,
      version: hb?.version ?? r.facts?.version ?? null,
      heartbeat_age_s: hb ? ageOf(hb.at, now) : null,
      report: rep
        ? { outcome: rep.outcome, serial: rep.serial, seq: rep.seq, age_s: ageOf(rep.at, now) }
        : null,
      confirmed: hb?.confirmed ?? null,
      moved_to: r.moved_to,
      dropped: e?.dropped ?? 0,
    };
  });
  const silence = (row: FleetRow) =>
    row.heartbeat_age_s === null ? Number.POSITIVE_INFINITY : row.heartbeat_age_s;
  return rows.sort((a, b) => silence(b) - silence(a) || a.node.localeCompare(b.node));
}

export function age(s: number | null): string {
  if (s === null) return "never";
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}

export function fleetTable(rows: FleetRow[]): string {
  if (!rows.length) return "no nodes: `mesh-host mesh node add NAME` adds one\n";
  // what a node said (its version, its report's outcome and mode) is shown escaped: it must not drive the terminal
  const cells = rows.map((r) =>
    [
      r.node,
      r.enrolled ? (r.mode ?? "-") : "not enrolled",
      r.version ?? "-",
      age(r.heartbeat_age_s),
      r.report ? `${r.report.outcome} serial ${r.report.serial ?? "?"} ${age(r.report.age_s)}` : "-",
      r.confirmed === null ? "-" : r.confirmed ? "yes" : "no",
    ].map((c) => printable(c, FLEET_CELL_CHARS)),
  );
  const head = ["NODE", "MODE", "VERSION", "HEARTBEAT", "LAST REPORT", "CONFIRMED"];
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const dropped = rows
    .filter((r) => r.dropped)
    .map((r) => `${r.node}: ${r.dropped} message(s) dropped, not signed by its identity key\n`);
  return [head, ...cells]
    .map(
      (c) =>
        `${c
          .map((v, i) => v.padEnd(widths[i]!))
          .join("  ")
          .trimEnd()}\n`,
    )
    .join("")
    .concat(...dropped);
}
