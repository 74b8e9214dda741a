// The three scenarios, the same for every tool: first apply (files absent), no-op (all already right), and
// drift repair (one file edited by hand, then apply). Each run is checked against the files afterwards, so a
// tool that is fast because it did nothing does not count.
import { spawnSync } from "node:child_process";
import { type BenchFile, countRight, driftOne, type Workspace } from "./fixture.ts";
import type { Measured, Runner } from "./runners.ts";
import { median } from "./stats.ts";

export const SCENARIOS = ["first", "noop", "drift"] as const;
export type Scenario = (typeof SCENARIOS)[number];

export const SCENARIO_TITLES: Record<Scenario, string> = {
  first: "first apply",
  noop: "no-op",
  drift: "drift repair",
};

export interface ScenarioResult {
  runsMs: number[];
  medianMs: number;
  peakKb: number | null;
  failed: string[];
}

export interface ToolResult {
  tool: string;
  kind: Runner["kind"];
  n: number;
  scenarios: Partial<Record<Scenario, ScenarioResult>>;
  /** The largest peak RSS over every run of this tool at this N (whole processes only). */
  peakKb: number | null;
}

export interface RepeatPlan {
  /** Runs of each scenario at most. */
  reps: number;
  /** Stop repeating a scenario once its runs took this long (at least one run is always made). */
  budgetMs: number;
}

/** Write back dirty pages between series, so one tool's writeback is not billed to the next. */
export function settle(): void {
  spawnSync("sync", { stdio: "ignore" });
}

async function repeat(
  plan: RepeatPlan,
  run: (k: number) => Promise<Measured>,
  verify: (k: number) => string | null,
): Promise<ScenarioResult> {
  const runsMs: number[] = [];
  const failed: string[] = [];
  let peakKb: number | null = null;
  let spent = 0;
  for (let k = 0; k < plan.reps && (k === 0 || spent < plan.budgetMs); k++) {
    const m = await run(k);
    spent += m.ms;
    const wrong = m.failed ?? verify(k);
    if (wrong) {
      failed.push(wrong);
      break;
    }
    runsMs.push(m.ms);
    if (m.peakKb !== null) peakKb = Math.max(peakKb ?? 0, m.peakKb);
  }
  return { runsMs, medianMs: median(runsMs), peakKb, failed };
}

/**
 * Every scenario for one tool at one N: `plan.reps` first applies on fresh roots, then no-ops and drift
 * repairs on the last of those roots.
 */
export async function measureTool(runner: Runner, ws: Workspace, plan: RepeatPlan): Promise<ToolResult> {
  const n = ws.n;
  const allRight = (root: string) => {
    const right = countRight(root, ws.files);
    return right === n ? null : `${runner.name}: ${n - right} of ${n} files not as declared afterwards`;
  };
  let target = ws.fresh(slug(runner.name));
  const reps = Math.min(plan.reps, runner.reps ?? plan.reps);
  const first = await repeat(
    { ...plan, reps },
    async (k) => {
      if (k > 0) target = ws.fresh(slug(runner.name));
      settle();
      return runner.first({ ...target, ws });
    },
    () => allRight(target.root),
  );
  const scenarios: ToolResult["scenarios"] = { first };
  if (first.failed.length === 0) {
    settle();
    const noop = await repeat(
      { ...plan, reps },
      () => runner.check({ ...target, ws }),
      (k) => (k === 0 ? allRight(target.root) : null),
    );
    const drifted = (k: number): BenchFile => ws.files[(k * 7919 + 13) % n]!;
    const drift = await repeat(
      { ...plan, reps },
      (k) => {
        driftOne(target.root, drifted(k), k);
        return runner.check({ ...target, ws });
      },
      (k) =>
        countRight(target.root, [drifted(k)]) === 1
          ? null
          : `${runner.name}: the edited file was not put back`,
    );
    Object.assign(scenarios, { noop, drift });
  }
  const peaks = Object.values(scenarios)
    .map((s) => s.peakKb)
    .filter((p): p is number => p !== null);
  return {
    tool: runner.name,
    kind: runner.kind,
    n,
    scenarios,
    peakKb: peaks.length ? Math.max(...peaks) : null,
  };
}

export function slug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");
}
