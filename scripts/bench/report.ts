// Tables from results: each figure beside the floor measured in the same run, the ratio as the headline.
import { SCENARIO_TITLES, SCENARIOS, type Scenario, type ToolResult } from "./scenarios.ts";
import { formatCount, formatKb, formatMs, formatRatio, markdownTable, verdict } from "./stats.ts";

export const FLOOR_PROCESS = /^floor \(process/;
export const FLOOR_IN_PROCESS = /^floor \(in-process/;

/** The floor a row is compared with: the process floor for whole processes, the in-process floor otherwise. */
export function floorFor(results: readonly ToolResult[], r: ToolResult): ToolResult | undefined {
  const pattern = r.kind === "process" ? FLOOR_PROCESS : FLOOR_IN_PROCESS;
  return results.find((x) => x.n === r.n && pattern.test(x.tool));
}

export function medianOf(r: ToolResult | undefined, s: Scenario): number {
  const m = r?.scenarios[s]?.medianMs;
  return m === undefined ? Number.NaN : m;
}

function cell(results: readonly ToolResult[], r: ToolResult, s: Scenario): string {
  const sc = r.scenarios[s];
  if (!sc) return r.scenarios.first?.failed.length ? "—" : "not run";
  if (!sc.runsMs.length) return `failed: ${sc.failed[0] ?? "?"}`;
  const base = floorFor(results, r);
  const isFloor = base === r;
  const runs = sc.runsMs.length > 1 ? "" : " (1 run)";
  return isFloor
    ? `${formatMs(sc.medianMs)}${runs}`
    : `${formatMs(sc.medianMs)} ${formatRatio(sc.medianMs, medianOf(base, s))}${runs}`;
}

/** One table for one N: a row per tool, a column per scenario, and peak RSS. */
export function toolsTable(results: readonly ToolResult[], n: number): string {
  const rows = results
    .filter((r) => r.n === n)
    .map((r) => [
      r.tool,
      ...SCENARIOS.map((s) => cell(results, r, s)),
      r.kind === "process" ? formatKb(r.peakKb) : "—",
    ]);
  return markdownTable(
    [`N = ${formatCount(n)}`, ...SCENARIOS.map((s) => SCENARIO_TITLES[s]), "peak RSS"],
    rows,
  );
}

export interface TargetLine {
  what: string;
  target: string;
  measured: string;
  verdict: string;
}

export function targetsTable(lines: readonly TargetLine[]): string {
  return markdownTable(
    ["target", "wanted", "measured", "verdict"],
    lines.map((l) => [l.what, l.target, l.measured, l.verdict]),
  );
}

/** What a time is read beside: a figure of the same run (`node -e 0`, the floor), so a loaded machine shows. */
export interface Baseline {
  label: string;
  ms: number;
}

/** A time target: measured median against a bound in ms, and as a ratio to its baseline of the same run. */
export function timeTarget(what: string, measuredMs: number, boundMs: number, base?: Baseline): TargetLine {
  const beside =
    base && Number.isFinite(base.ms) && Number.isFinite(measuredMs)
      ? ` = ${formatRatio(measuredMs, base.ms)} ${base.label} (${formatMs(base.ms)} in this run)`
      : "";
  return {
    what,
    target: `≤ ${formatMs(boundMs)}`,
    measured: `${formatMs(measuredMs)}${beside}`,
    verdict: verdict(measuredMs, boundMs),
  };
}

/** A memory target in MB (measured in kB). */
export function rssTarget(what: string, measuredKb: number | null, boundMb: number): TargetLine {
  const mb = measuredKb === null ? Number.NaN : measuredKb / 1024;
  return { what, target: `≤ ${boundMb} MB`, measured: formatKb(measuredKb), verdict: verdict(mb, boundMb) };
}

/** "at least `factor`× faster than `peer`": the peer's median over ours. */
export function speedupTarget(what: string, oursMs: number, peerMs: number, factor: number): TargetLine {
  const speedup = peerMs / oursMs;
  return {
    what,
    target: `≥ ${factor}× faster`,
    measured: Number.isFinite(speedup)
      ? `${speedup.toFixed(1)}× (${formatMs(oursMs)} vs ${formatMs(peerMs)})`
      : "—",
    verdict: Number.isFinite(speedup)
      ? verdict(speedup, factor, true)
      : "not measured (peer not run: not installed, or --only-ours)",
  };
}
