// The targets (issue 22, and issue 10's that still stand), each against what this run measured, and each
// beside its baseline from the same run: met, or missed and by how much.
import type { MeshResults, Sizes } from "./link.ts";
import { type Baseline, medianOf, rssTarget, speedupTarget, type TargetLine, timeTarget } from "./report.ts";
import type { ToolResult } from "./scenarios.ts";
import type { ColdStart } from "./startup.ts";
import { formatBytes, formatKb, formatMs, formatRatio, linearity, verdict } from "./stats.ts";

export const TARGETS = {
  versionRatio: 1.5,
  planRatio: 2,
  noop1kMs: 80,
  noop10kMs: 500,
  inProcessNoop1kMs: 20,
  first1kMs: 500,
  cfengineSpeedup: 5,
  puppetSpeedup: 50,
  /** Peak RSS over `node -e 0`'s, measured in the same run. */
  rss1kOverNodeMb: 15,
  rss10kOverNodeMb: 60,
  p50Ms: 10,
  p99Ms: 50,
  firstHeartbeatMs: 200,
  idleRssMb: 60,
  leakMb: 5,
  packageMib: 30,
} as const;

export interface TargetInputs {
  results: ToolResult[];
  exeName: string;
  coldStart: ColdStart | { skipped: string };
  mesh: MeshResults | { skipped: string };
  size: Sizes;
}

const notMeasured = (what: string, target: string, why: string): TargetLine => ({
  what,
  target,
  measured: "—",
  verdict: `not measured: ${why}`,
});

/** "×1.3 node -e 0 (45 ms vs 34 ms)": a start-up target as the ratio the issue names, the times beside it. */
function startTarget(what: string, s: ColdStart["version"], nodeMs: number, bound: number): TargetLine {
  return {
    what,
    target: `≤ ×${bound} \`node -e 0\``,
    measured: `×${s.ratio.toFixed(2)} (${formatMs(s.ms)} vs ${formatMs(nodeMs)}; peak ${formatKb(s.peakKb)})`,
    verdict: verdict(s.ratio, bound),
  };
}

/** Peak RSS over the pinned `node -e 0`'s in the same run. */
function rssOverNode(what: string, peakKb: number | null, nodeKb: number | null, overMb: number): TargetLine {
  const over = peakKb === null || nodeKb === null ? Number.NaN : (peakKb - nodeKb) / 1024;
  return {
    what,
    target: `≤ \`node -e 0\` + ${overMb} MB`,
    measured: Number.isFinite(over)
      ? `+${over.toFixed(1)} MB (${formatKb(peakKb)} vs ${formatKb(nodeKb)})`
      : formatKb(peakKb),
    verdict: verdict(over, overMb),
  };
}

export function targetsOf(i: TargetInputs): TargetLine[] {
  const at = (tool: string | RegExp, n: number) =>
    i.results.find((r) => r.n === n && (typeof tool === "string" ? r.tool === tool : tool.test(r.tool)));
  const ours = (n: number) => at(i.exeName, n);
  const inProc = (n: number) => at("mesh-host (in-process)", n);
  const floor = (n: number, kind: "process" | "in" = "process") =>
    at(kind === "in" ? /^floor \(in-process/ : /^floor \(process/, n);
  const cold = "skipped" in i.coldStart ? null : i.coldStart;
  const lines: TargetLine[] = [];
  // the absolute bounds were set on a quiet machine: each time is also shown over its baseline of this run
  const node = cold ? { label: "`node -e 0`", ms: cold.node.ms } : undefined;
  const inFloor = (n: number) => ({ label: "the in-process floor", ms: medianOf(floor(n, "in"), "noop") });
  if (!cold) {
    const why = (i.coldStart as { skipped: string }).skipped;
    lines.push(notMeasured("`mesh-host version`", `≤ ×${TARGETS.versionRatio} \`node -e 0\``, why));
    lines.push(notMeasured(`\`mesh-host plan\`, 10 resources`, `≤ ×${TARGETS.planRatio} \`node -e 0\``, why));
  } else {
    lines.push(startTarget("`mesh-host version`", cold.version, cold.node.ms, TARGETS.versionRatio));
    lines.push(startTarget("`mesh-host plan`, 10 resources", cold.plan, cold.node.ms, TARGETS.planRatio));
  }
  lines.push(
    timeTarget("no-op, 1,000 files, whole process", medianOf(ours(1000), "noop"), TARGETS.noop1kMs, node),
  );
  for (const [peer, factor] of [
    [/^CFEngine/, TARGETS.cfengineSpeedup],
    [/^Puppet/, TARGETS.puppetSpeedup],
  ] as const)
    lines.push(
      speedupTarget(
        `no-op, 1,000 files: faster than ${peer.source.slice(1)}`,
        medianOf(ours(1000), "noop"),
        medianOf(at(peer, 1000), "noop"),
        factor,
      ),
    );
  lines.push(
    ours(10_000)
      ? timeTarget(
          "no-op, 10,000 files, whole process",
          medianOf(ours(10_000), "noop"),
          TARGETS.noop10kMs,
          node,
        )
      : notMeasured("no-op, 10,000 files, whole process", "≤ 500 ms", "the full run measures N = 10,000"),
  );
  lines.push(
    timeTarget(
      "no-op, 1,000 files, in a running host (the drift check)",
      medianOf(inProc(1000), "noop"),
      TARGETS.inProcessNoop1kMs,
      inFloor(1000),
    ),
  );
  const first = medianOf(ours(1000), "first");
  const firstFloor = medianOf(floor(1000), "first");
  lines.push(timeTarget("first apply, 1,000 files (fsync + rename each)", first, TARGETS.first1kMs, node));
  lines.push({
    what: "first apply, 1,000 files, below the serial floor",
    target: "< ×1.0 the floor",
    measured: `${formatRatio(first, firstFloor)} (${formatMs(first)} vs ${formatMs(firstFloor)})`,
    verdict: verdict(first / firstFloor, 1),
  });
  lines.push(...linearityTargets(i.results.filter((r) => r.tool === i.exeName)));
  const nodeKb = cold?.node.peakKb ?? null;
  lines.push(
    rssOverNode("peak RSS, 1,000 files", ours(1000)?.peakKb ?? null, nodeKb, TARGETS.rss1kOverNodeMb),
  );
  lines.push(
    ours(10_000)
      ? rssOverNode("peak RSS, 10,000 files", ours(10_000)?.peakKb ?? null, nodeKb, TARGETS.rss10kOverNodeMb)
      : notMeasured("peak RSS, 10,000 files", "≤ `node -e 0` + 60 MB", "the full run measures N = 10,000"),
  );
  lines.push(...meshTargets(i.mesh, node));
  lines.push(packageTarget(i.size));
  return lines;
}

function linearityTargets(ours: readonly ToolResult[]): TargetLine[] {
  return (["first", "noop"] as const).map((s) => {
    const lin = linearity(ours.map((r) => ({ n: r.n, ms: medianOf(r, s) })));
    return lin
      ? {
          what: `cost linear in N (${s === "first" ? "first apply" : "no-op"}, marginal cost per file)`,
          target: "last step ≤ 1.5× the first",
          measured: lin.perItemMs.map((m) => `${(m * 1000).toFixed(0)} µs`).join(" → "),
          verdict: lin.linear ? "met" : "missed (grows faster than N)",
        }
      : notMeasured(`cost linear in N (${s})`, "flat marginal cost", "needs three sizes (the full run)");
  });
}

function packageTarget(size: Sizes): TargetLine {
  const pkg = size.packages[0];
  if (!pkg) return notMeasured("package size", `≤ ${TARGETS.packageMib} MiB`, "no dist/*.pkg.tar.zst");
  return {
    what: "package size",
    target: `≤ ${TARGETS.packageMib} MiB`,
    measured: `${formatBytes(pkg.bytes)} (${pkg.file})`,
    verdict: verdict(pkg.bytes / 2 ** 20, TARGETS.packageMib),
  };
}

function meshTargets(m: MeshResults | { skipped: string }, node?: Baseline): TargetLine[] {
  const rows: [string, string][] = [
    ["push-to-applied p50", `≤ ${TARGETS.p50Ms} ms`],
    ["push-to-applied p99", `≤ ${TARGETS.p99Ms} ms`],
    ["first heartbeat after `run`", `≤ ${TARGETS.firstHeartbeatMs} ms`],
    ["idle RSS of `run`", `≤ ${TARGETS.idleRssMb} MB`],
    ["RSS growth over the declarations pushed", `≤ ${TARGETS.leakMb} MB`],
  ];
  if ("skipped" in m) return rows.map(([what, target]) => notMeasured(what, target, m.skipped));
  const growthKb =
    m.leak.rssAfterKb !== null && m.leak.rssBeforeKb !== null ? m.leak.rssAfterKb - m.leak.rssBeforeKb : null;
  return [
    timeTarget("push-to-applied p50", m.latencyMs.p50, TARGETS.p50Ms),
    timeTarget("push-to-applied p99", m.latencyMs.p99, TARGETS.p99Ms),
    timeTarget("first heartbeat after `run`", m.firstHeartbeatMs, TARGETS.firstHeartbeatMs, node),
    rssTarget(`idle RSS of \`run\` after ${m.idleS} s`, m.idleRssKb, TARGETS.idleRssMb),
    {
      ...rssTarget(`RSS growth over ${m.leak.pushed} declarations`, growthKb, TARGETS.leakMb),
      measured: `${formatKb(growthKb)} (${formatKb(m.leak.rssBeforeKb)} → ${formatKb(m.leak.rssMidKb)} → ${formatKb(m.leak.rssAfterKb)})`,
    },
  ];
}
