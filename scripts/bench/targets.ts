// Issue 10's targets, each against what this run measured: met, or missed and by how much.
import type { ColdStart, MeshResults } from "./link.ts";
import { medianOf, rssTarget, speedupTarget, type TargetLine, timeTarget } from "./report.ts";
import type { ToolResult } from "./scenarios.ts";
import { formatKb, formatMs, formatRatio, linearity, verdict } from "./stats.ts";

export const TARGETS = {
  noop1kMs: 100,
  noop10kMs: 500,
  inProcessNoop1kMs: 20,
  first1kMs: 500,
  cfengineSpeedup: 4,
  puppetSpeedup: 50,
  rss1kMb: 50,
  rss10kMb: 80,
  p50Ms: 10,
  p99Ms: 50,
  coldStartMs: 80,
  firstHeartbeatMs: 300,
  idleRssMb: 60,
  leakMb: 10,
} as const;

export interface TargetInputs {
  results: ToolResult[];
  exeName: string;
  coldStart: ColdStart | { skipped: string };
  mesh: MeshResults | { skipped: string };
}

const notMeasured = (what: string, target: string, why: string): TargetLine => ({
  what,
  target,
  measured: "—",
  verdict: `not measured: ${why}`,
});

export function issue10Targets(i: TargetInputs): TargetLine[] {
  const at = (tool: string | RegExp, n: number) =>
    i.results.find((r) => r.n === n && (typeof tool === "string" ? r.tool === tool : tool.test(r.tool)));
  const ours = (n: number) => at(i.exeName, n);
  const inProc = (n: number) => at("mesh-host (in-process)", n);
  const floor = (n: number) => at(/^floor \(process/, n);
  const lines: TargetLine[] = [];
  lines.push(timeTarget("no-op, 1,000 files, whole process", medianOf(ours(1000), "noop"), TARGETS.noop1kMs));
  for (const [peer, factor] of [
    [/^CFEngine/, TARGETS.cfengineSpeedup],
    [/^Puppet/, TARGETS.puppetSpeedup],
  ] as const) {
    const p = at(peer, 1000);
    lines.push(
      speedupTarget(
        `no-op, 1,000 files: faster than ${peer.source.slice(1)}`,
        medianOf(ours(1000), "noop"),
        medianOf(p, "noop"),
        factor,
      ),
    );
  }
  lines.push(
    ours(10_000)
      ? timeTarget("no-op, 10,000 files, whole process", medianOf(ours(10_000), "noop"), TARGETS.noop10kMs)
      : notMeasured("no-op, 10,000 files, whole process", "≤ 500 ms", "the full run measures N = 10,000"),
  );
  lines.push(
    timeTarget(
      "no-op, 1,000 files, in a running host",
      medianOf(inProc(1000), "noop"),
      TARGETS.inProcessNoop1kMs,
    ),
  );
  const first = medianOf(ours(1000), "first");
  const firstFloor = medianOf(floor(1000), "first");
  lines.push(timeTarget("first apply, 1,000 files (fsync + rename each)", first, TARGETS.first1kMs));
  lines.push({
    what: "first apply, 1,000 files, below the serial floor",
    target: "< ×1.0 the floor",
    measured: `${formatRatio(first, firstFloor)} (${formatMs(first)} vs ${formatMs(firstFloor)})`,
    verdict: verdict(first / firstFloor, 1),
  });
  for (const s of ["first", "noop"] as const) {
    const points = i.results.filter((r) => r.tool === i.exeName).map((r) => ({ n: r.n, ms: medianOf(r, s) }));
    const lin = linearity(points);
    lines.push(
      lin
        ? {
            what: `cost linear in N (${s === "first" ? "first apply" : "no-op"}, marginal cost per file)`,
            target: "last step ≤ 1.5× the first",
            measured: lin.perItemMs.map((m) => `${(m * 1000).toFixed(0)} µs`).join(" → "),
            verdict: lin.linear ? "met" : "missed (grows faster than N)",
          }
        : notMeasured(`cost linear in N (${s})`, "flat marginal cost", "needs three sizes (the full run)"),
    );
  }
  lines.push(rssTarget("peak RSS, 1,000 files", ours(1000)?.peakKb ?? null, TARGETS.rss1kMb));
  lines.push(
    ours(10_000)
      ? rssTarget("peak RSS, 10,000 files", ours(10_000)?.peakKb ?? null, TARGETS.rss10kMb)
      : notMeasured("peak RSS, 10,000 files", "≤ 80 MB", "the full run measures N = 10,000"),
  );
  lines.push(
    "skipped" in i.coldStart
      ? notMeasured("cold start of `mesh-host version`", "≤ 80 ms", i.coldStart.skipped)
      : {
          ...timeTarget("cold start of `mesh-host version`", i.coldStart.exeMs, TARGETS.coldStartMs),
          measured: `${formatMs(i.coldStart.exeMs)} (node -e 0: ${formatMs(i.coldStart.nodeMs)}, ${formatRatio(i.coldStart.exeMs, i.coldStart.nodeMs)})`,
        },
  );
  lines.push(...meshTargets(i.mesh));
  return lines;
}

function meshTargets(m: MeshResults | { skipped: string }): TargetLine[] {
  const rows: [string, string][] = [
    ["push-to-applied p50", "≤ 10 ms"],
    ["push-to-applied p99", "≤ 50 ms"],
    ["first heartbeat after `run`", "≤ 300 ms"],
    ["idle RSS of `run`", "≤ 60 MB"],
    ["RSS growth over the declarations pushed", "≤ 10 MB"],
  ];
  if ("skipped" in m) return rows.map(([what, target]) => notMeasured(what, target, m.skipped));
  const growthKb =
    m.leak.rssAfterKb !== null && m.leak.rssBeforeKb !== null ? m.leak.rssAfterKb - m.leak.rssBeforeKb : null;
  return [
    timeTarget("push-to-applied p50", m.latencyMs.p50, TARGETS.p50Ms),
    timeTarget("push-to-applied p99", m.latencyMs.p99, TARGETS.p99Ms),
    timeTarget("first heartbeat after `run`", m.firstHeartbeatMs, TARGETS.firstHeartbeatMs),
    rssTarget(`idle RSS of \`run\` after ${m.idleS} s`, m.idleRssKb, TARGETS.idleRssMb),
    {
      ...rssTarget(`RSS growth over ${m.leak.pushed} declarations`, growthKb, TARGETS.leakMb),
      measured: `${formatKb(growthKb)} (${formatKb(m.leak.rssBeforeKb)} → ${formatKb(m.leak.rssAfterKb)})`,
    },
  ];
}
