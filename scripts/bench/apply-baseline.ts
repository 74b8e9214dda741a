// `npm run bench:apply -- --baseline REF [--n 1000 --reps 5]`: the apply figures of this build beside those of
// commit REF, in one run. REF is exported with `git archive` and built to its own executable (baseline.ts's
// buildBaseline); this checkout's is `dist/mesh-host`, built afresh. Both apply the same N files: first apply
// on a fresh root, no-op re-apply, one file drifted and repaired; the two take turns run by run (which goes
// first alternates), so the machine's load falls on both alike, and each pair of runs gives a ratio. Printed:
// each build's median per scenario and the median of the paired ratios (this build / REF).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureSea } from "../../test/support/sea.ts";
import { buildBaseline } from "./baseline.ts";
import { countRight, driftOne, workspace } from "./fixture.ts";
import { executableRunner, type Runner } from "./runners.ts";
import { SCENARIO_TITLES, SCENARIOS, type Scenario, settle, slug } from "./scenarios.ts";
import { formatCount, formatMs, markdownTable, median } from "./stats.ts";

interface Side {
  name: string;
  runner: Runner;
  times: Record<Scenario, number[]>;
  /** The root and state the no-op and drift runs apply to: the last first apply's. */
  target?: { root: string; state: string };
}

const sideOf = (name: string, bin: string): Side => ({
  name,
  runner: executableRunner({ argv: [bin], label: name, file: bin, note: "" }),
  times: { first: [], noop: [], drift: [] },
});

/** One run of `scenario` by `s`, checked against the files afterwards, its time kept. */
async function runOnce(
  s: Side,
  scenario: Scenario,
  k: number,
  ws: ReturnType<typeof workspace>,
): Promise<void> {
  if (scenario === "first") s.target = ws.fresh(slug(s.name));
  const target = { ...s.target!, ws };
  const drifted = ws.files[(k * 7919 + 13) % ws.n]!;
  if (scenario === "drift") driftOne(target.root, drifted, k);
  settle();
  const m = scenario === "first" ? await s.runner.first(target) : await s.runner.check(target);
  if (m.failed) throw new Error(`${s.name}, ${SCENARIO_TITLES[scenario]}: ${m.failed}`);
  const right = scenario === "drift" ? countRight(target.root, [drifted]) : countRight(target.root, ws.files);
  if (right !== (scenario === "drift" ? 1 : ws.n))
    throw new Error(`${s.name}, ${SCENARIO_TITLES[scenario]}: the files are not as declared afterwards`);
  s.times[scenario].push(m.ms);
}

/** The paired comparison, as markdown: each build's medians and the median of this build / REF, run by run. */
export async function applyBaselineBench(ref: string, n: number, reps: number): Promise<string> {
  const base = mkdtempSync(join(tmpdir(), "bench-apply-baseline-"));
  try {
    const sides = [sideOf(`baseline ${ref}`, buildBaseline(ref, base)), sideOf("this build", ensureSea())];
    const ws = workspace(n, base);
    // the first apply of each series is on a fresh root; the no-op and drift runs use the last of those roots
    for (const scenario of SCENARIOS)
      for (let k = 0; k < reps; k++)
        for (const s of k % 2 ? [...sides].reverse() : sides) await runOnce(s, scenario, k, ws);
    const [old, now] = sides as [Side, Side];
    const rows = SCENARIOS.map((sc) => {
      const ratios = now.times[sc].map((t, k) => t / old.times[sc][k]!);
      return [
        SCENARIO_TITLES[sc],
        formatMs(median(old.times[sc])),
        formatMs(median(now.times[sc])),
        `${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`,
      ];
    });
    return [
      `## bench:apply --baseline ${ref}: ${formatCount(n)} files, ${reps} paired runs each (${new Date().toISOString().slice(0, 10)})`,
      "",
      markdownTable(["scenario", `baseline ${ref}`, "this build", "this / baseline, paired (min–max)"], rows),
      "",
      "Whole processes, the two executables taking turns run by run; the ratio is the median of each pair's.",
    ].join("\n");
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
}
