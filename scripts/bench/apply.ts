// `npm run bench:apply [-- --n 1000 --reps 5]`: issue 3's benchmark. N files of 200 bytes (mode 0644): first
// apply, no-op re-apply, one file drifted and repaired; by the executable, in-process and the floor, each
// printed beside the floor measured in the same run. Prints markdown on stdout. With `--baseline REF`: the
// executable's figures beside commit REF's, paired run by run (apply-baseline.ts).
import { cpus, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { applyBaselineBench } from "./apply-baseline.ts";
import { workspace } from "./fixture.ts";
import { medianOf, type TargetLine, targetsTable, timeTarget, toolsTable } from "./report.ts";
import {
  executableRunner,
  floorInProcessRunner,
  floorProcessRunner,
  inProcessRunner,
  meshHostExecutable,
  type Runner,
} from "./runners.ts";
import { measureTool, type ToolResult } from "./scenarios.ts";
import { formatCount, formatRatio } from "./stats.ts";

/** Issue 3's targets for N = 1,000, whole process. */
export const APPLY_TARGETS_MS = { first: 1000, noop: 150, drift: 150 } as const;

export interface ApplyBenchOptions {
  n: number;
  reps: number;
  /** Progress lines go here (stderr), so stdout stays the table. */
  say?: (line: string) => void;
}

export interface ApplyBenchResult {
  results: ToolResult[];
  markdown: string;
  targets: TargetLine[];
}

export async function applyBench(o: ApplyBenchOptions): Promise<ApplyBenchResult> {
  const say = o.say ?? (() => {});
  const exe = meshHostExecutable();
  const runners: Runner[] = [
    executableRunner(exe),
    floorProcessRunner(),
    inProcessRunner,
    floorInProcessRunner,
  ];
  const ws = workspace(o.n);
  const results: ToolResult[] = [];
  try {
    for (const r of runners) {
      say(`bench:apply: ${r.name} at N = ${formatCount(o.n)}`);
      results.push(await measureTool(r, ws, { reps: o.reps, budgetMs: 60_000 }));
    }
  } finally {
    ws.cleanup();
  }
  const ours = results[0]!;
  const targets = [
    timeTarget(
      `first apply, ${formatCount(o.n)} files, whole process`,
      medianOf(ours, "first"),
      APPLY_TARGETS_MS.first,
    ),
    timeTarget(`no-op re-apply, whole process`, medianOf(ours, "noop"), APPLY_TARGETS_MS.noop),
    timeTarget(
      `one file drifted and repaired, whole process`,
      medianOf(ours, "drift"),
      APPLY_TARGETS_MS.drift,
    ),
  ];
  const inProc = results.find((r) => r.kind === "in-process" && r.tool.startsWith("mesh-host"));
  const floorIn = results.find((r) => r.tool.startsWith("floor (in-process"));
  const lines = [
    `## mesh-host apply: ${formatCount(o.n)} files of 200 bytes, mode 0644 (${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB)`,
    "",
    toolsTable(results, o.n),
    "",
    `Median of up to ${o.reps} runs each; first applies on fresh roots. ×: the median over the floor of the same kind`,
    `(whole process against \`floor (process)\`, in-process against \`floor (in-process)\`), measured in this run.`,
    `The floor is a serial loop: temp file + write + fchmod + fsync + rename per file, each directory fsynced once;`,
    `its check is lstat + read + sha256 per file. ${exe.note}.`,
    `In-process (the drift timer's cost): read + parse + lock + plan + apply + report, no process start, inside`,
    `this process (Node ${process.version} through tsx, the working tree's src/);`,
    `no-op ${formatRatio(medianOf(inProc, "noop"), medianOf(floorIn, "noop"))} its floor.`,
    "",
    "### Targets (issue 3)",
    "",
    targetsTable(targets),
  ];
  for (const r of results)
    for (const [s, sc] of Object.entries(r.scenarios))
      for (const f of sc.failed) lines.push("", `- failed (${s}): ${f}`);
  return { results, markdown: lines.join("\n"), targets };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      n: { type: "string", default: "1000" },
      reps: { type: "string", default: "5" },
      baseline: { type: "string" },
    },
  });
  const n = Number(values.n);
  const reps = Number(values.reps);
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(reps) || reps < 1)
    throw new Error("--n and --reps must be positive integers");
  if (values.baseline) {
    process.stdout.write(`${await applyBaselineBench(values.baseline, n, reps)}\n`);
    return;
  }
  const { markdown } = await applyBench({ n, reps, say: (l) => process.stderr.write(`${l}\n`) });
  process.stdout.write(`${markdown}\n`);
}

if (process.argv[1]?.endsWith("apply.ts")) await main();
