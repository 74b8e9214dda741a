// The fleet view: what the controllers heard last from each node (the mesh-fleet bucket), merged so that two
// controllers writing one node's entry keep the newer of each half, and the rows `mesh nodes` shows from it.
import { FLEET_CELL_CHARS } from "../defaults.ts";
import { printable } from "../printable.ts";
import type { Heartbeat, Report } from "../vocabulary/index.ts";
import type { FleetEntry, NodeRecord } from "./state.ts";

/** What one controller heard of a node since it last wrote the node's entry. */
export interface Heard {
  heartbeat?: NonNullable<FleetEntry["heartbeat"]>;
  report?: NonNullable<FleetEntry["report"]>;
  dropped?: number;
  /** Messages on its subjects that did not verify against its identity key. */
  unverified?: number;
}

export function heartbeatOf(hb: Heartbeat, at = new Date()): NonNullable<FleetEntry["heartbeat"]> {
  return { at: at.toISOString(), version: hb.version, uptime_s: hb.uptime_s, confirmed: hb.confirmed };
}

/** The serial a report answers, from the pushes the node's record remembers (a report names only its digest). */
export function serialOf(record: NodeRecord | null, digest: string): number | null {
  return record?.pushes.find((p) => p.digest === digest)?.serial ?? null;
}

/** The serial of the declaration delivered at stream sequence `seq` (a heartbeat's last names only that). */
export function serialOfSeq(record: NodeRecord | null, seq: number): number | null {
  return record?.pushes.find((p) => p.seq === seq)?.serial ?? null;
}

export function reportOf(
  report: Report,
  record: NodeRecord | null,
  at = new Date(),
): NonNullable<FleetEntry["report"]> {
  return {
    at: at.toISOString(),
    outcome: report.outcome,
    seq: report.declaration.seq,
    digest: report.declaration.digest,
    serial: serialOf(record, report.declaration.digest),
    mode: report.mode ?? null,
  };
}

const later = <T extends { at: string }>(a: T | null, b: T | undefined): T | null =>
  !b ? a : !a || Date.parse(b.at) >= Date.parse(a.at) ? b : a;

/**
 * A report on an older serial than the one shown says nothing of what the node holds now: a replay of an old
 * declaration, refused by the node, made a healthy node's row read `refused serial 1` (`mesh up` says it).
 */
export function olderThanShown(entry: FleetEntry | null, serial: number | null): boolean {
  const shown = entry?.report?.serial ?? null;
  return shown !== null && serial !== null && serial < shown;
}

/**
 * The entry with what was heard folded in: the newer heartbeat and report win (a report on an older serial than
 * the one shown is not kept), dropped heartbeats add up.
 */
export function merged(current: FleetEntry | null, heard: Heard): FleetEntry {
  const base = current ?? { heartbeat: null, report: null, dropped_heartbeats: 0 };
  const fresh = heard.report && !olderThanShown(base, heard.report.serial) ? heard.report : undefined;
  let report = later(base.report, fresh);
  // a refused declaration's report names no mode: the node's mode is still what it last said
  if (report && report.mode === null && base.report?.mode) report = { ...report, mode: base.report.mode };
  return {
    heartbeat: later(base.heartbeat, heard.heartbeat),
    report,
    dropped_heartbeats: base.dropped_heartbeats + (heard.dropped ?? 0),
    dropped_unverified: (base.dropped_unverified ?? 0) + (heard.unverified ?? 0),
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
  /** Heartbeats dropped unread: past the node's budget (a flood). */
  heartbeats_dropped: number;
  /** Reports and heartbeats on its subjects dropped as not signed by its identity key: someone speaking as it. */
  unverified_dropped: number;
  /** The operator's labels, what `--where` selects by (with the node's facts). */
  labels: Record<string, string>;
}

const ageOf = (iso: string, now: number) => Math.max(0, Math.round((now - Date.parse(iso)) / 1000));

/**
 * What was heard before the record was made belongs to another life of the name (a node removed and added
 * again): shown with the new record, it made a row that said "not enrolled" beside a heartbeat and a report.
 */
function thisLife<T extends { at: string }>(heard: T | null, record: NodeRecord): T | null {
  return heard && Date.parse(heard.at) >= Date.parse(record.added_at) ? heard : null;
}

/** One row a node, the silent first (never heard, then the longest silence), then by name. */
export function fleetRows(
  records: NodeRecord[],
  fleet: ReadonlyMap<string, FleetEntry>,
  now = Date.now(),
): FleetRow[] {
  const rows = records.map((r): FleetRow => {
    const e = fleet.get(r.node);
    const hb = thisLife(e?.heartbeat ?? null, r);
    const rep = thisLife(e?.report ?? null, r);
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
      heartbeats_dropped: e?.dropped_heartbeats ?? 0,
      unverified_dropped: e?.dropped_unverified ?? 0,
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
  const cells = rows.map((r) =>
    [
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
      // what a node said (its version, its report's outcome and mode) is shown escaped: it must not drive the terminal
    ].map((c) => printable(c, FLEET_CELL_CHARS)),
  );
  const head = ["NODE", "MODE", "VERSION", "HEARTBEAT", "LAST REPORT", "CONFIRMED", "LABELS"];
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const unverified = rows
    .filter((r) => r.unverified_dropped)
    .map((r) => `${r.node}: ${r.unverified_dropped} message(s) dropped, not signed by its identity key\n`);
  return [head, ...cells]
    .map(
      (c) =>
        `${c
          .map((v, i) => v.padEnd(widths[i]!))
          .join("  ")
          .trimEnd()}\n`,
    )
    .join("")
    .concat(...unverified);
}
