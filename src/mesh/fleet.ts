// The fleet view: what `up` heard last from each node (fleet.json), and the rows `mesh nodes` shows from it.
import type { Heartbeat, Report } from "../vocabulary/index.ts";
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

/** The serial a report answers, from the pushes the node's record remembers (a report names only its digest). */
export function serialOf(record: NodeRecord | null, digest: string): number | null {
  return record?.pushes.find((p) => p.digest === digest)?.serial ?? null;
}

/** The serial of the declaration delivered at stream sequence `seq` (a heartbeat's last names only that). */
export function serialOfSeq(record: NodeRecord | null, seq: number): number | null {
  return record?.pushes.find((p) => p.seq === seq)?.serial ?? null;
}

/**
 * A report on an older serial than the one shown says nothing of what the node holds now: a replay of an old
 * declaration, refused by the node, made a healthy node's row read `refused serial 1` (`mesh up` says it).
 */
function olderThanShown(entry: FleetEntry, serial: number | null): boolean {
  const shown = entry.report?.serial ?? null;
  return shown !== null && serial !== null && serial < shown;
}

/** Kept in the fleet view unless it is about an older declaration than the one shown; whether it was. */
export function heardReport(
  fleet: Fleet,
  report: Report,
  record: NodeRecord | null,
  at = new Date(),
): boolean {
  const entry = entryOf(fleet, report.node);
  const serial = serialOf(record, report.declaration.digest);
  if (olderThanShown(entry, serial)) return false;
  // a refused declaration's report names no mode: the node's mode is still what it last said
  const mode = report.mode ?? entry.report?.mode ?? null;
  entry.report = {
    at: at.toISOString(),
    outcome: report.outcome,
    seq: report.declaration.seq,
    digest: report.declaration.digest,
    serial,
    mode,
  };
  return true;
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
  /** The operator's labels, what `--where` selects by (with the node's facts). */
  labels: Record<string, string>;
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
      labels: r.labels,
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
  const cells = rows.map((r) => [
    r.node,
    r.enrolled ? (r.mode ?? "-") : "not enrolled",
    r.version ?? "-",
    age(r.heartbeat_age_s),
    r.report ? `${r.report.outcome} serial ${r.report.serial ?? "?"} ${age(r.report.age_s)}` : "-",
    // false until the node's first reconcile after a start has finished: not yet, rather than a failure
    r.confirmed === null ? "-" : r.confirmed ? "yes" : "not yet",
    Object.entries(r.labels)
      .map(([k, v]) => `${k}=${v}`)
      .join(",") || "-",
  ]);
  const head = ["NODE", "MODE", "VERSION", "HEARTBEAT", "LAST REPORT", "CONFIRMED", "LABELS"];
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  return [head, ...cells]
    .map(
      (c) =>
        `${c
          .map((v, i) => v.padEnd(widths[i]!))
          .join("  ")
          .trimEnd()}\n`,
    )
    .join("");
}
