// `npm run bench [-- --quick] [--peers]`: how fast and how small the host is, beside the floor and the tools
// people use today, measured in the same run on this machine. Prints markdown, writes bench/results.json and
// bench/scaling.svg. --quick: N = 100 and 1,000 (under two minutes); the full run adds N = 10,000 and Ansible.
//   --peers        apt-get install cfengine3 puppet ansible-core first
//   --only-ours    skip the peers even when installed
//   --n 100,1000   other sizes; --reps K runs of each scenario; --out DIR (default bench/)
//   --cold-runs K, --idle-s S, --pushes K, --leak K, --skip-link: the link rows' sizes, or none of them
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, release, totalmem } from "node:os";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { progress } from "../../src/cli/progress.ts";
import { workspace } from "./fixture.ts";
import { type MeshResults, meshRows, runNotYet, type Sizes, sizes } from "./link.ts";
import { installPeers, peers } from "./peers.ts";
import { targetsTable, toolsTable } from "./report.ts";
import {
  executableRunner,
  floorInProcessRunner,
  floorProcessRunner,
  inProcessRunner,
  meshHostExecutable,
  PINNED_NODE,
  REPO,
  type Runner,
} from "./runners.ts";
import { measureTool, SCENARIO_TITLES, SCENARIOS, type ToolResult } from "./scenarios.ts";
import { type ColdStart, coldStart, dropCached, PLAN_RESOURCES } from "./startup.ts";
import { formatBytes, formatCount, formatKb, formatMs, markdownTable } from "./stats.ts";
import { figure } from "./svg.ts";
import { targetsOf } from "./targets.ts";

export interface BenchOptions {
  quick: boolean;
  sizes: number[];
  reps: number;
  outDir: string;
  installPeers: boolean;
  onlyOurs: boolean;
  coldRuns: number;
  /** Link rows: idle seconds, timed pushes, pushes for the leak check. */
  idleS: number;
  pushes: number;
  leak: number;
  skipLink: boolean;
  say: (line: string) => void;
}

export function optionsFrom(argv: string[], say: (line: string) => void): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean", default: false },
      peers: { type: "boolean", default: false },
      "only-ours": { type: "boolean", default: false },
      n: { type: "string" },
      reps: { type: "string" },
      out: { type: "string", default: join(REPO, "bench") },
      "cold-runs": { type: "string", default: "20" },
      "idle-s": { type: "string" },
      pushes: { type: "string" },
      leak: { type: "string" },
      "skip-link": { type: "boolean", default: false },
    },
  });
  const quick = Boolean(values.quick);
  const positive = (flag: string, v: string | undefined, fallback: number) => {
    const n = v === undefined ? fallback : Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${flag} must be a whole number, not "${v}"`);
    return n;
  };
  const list = values.n?.split(",").map((s) => positive("n", s.trim().replaceAll("_", ""), 0));
  return {
    quick,
    sizes: list?.filter((n) => n > 0) ?? (quick ? [100, 1000] : [100, 1000, 10_000]),
    reps: positive("reps", values.reps, quick ? 3 : 5),
    outDir: resolve(values.out ?? join(REPO, "bench")),
    installPeers: Boolean(values.peers),
    onlyOurs: Boolean(values["only-ours"]),
    coldRuns: positive("cold-runs", values["cold-runs"], 20),
    idleS: positive("idle-s", values["idle-s"], quick ? 10 : 60),
    pushes: positive("pushes", values.pushes, 200),
    skipLink: Boolean(values["skip-link"]),
    leak: positive("leak", values.leak, quick ? 200 : 2000),
    say,
  };
}

export interface BenchOutput {
  markdown: string;
  json: object;
  svg: string;
}

export async function runBench(o: BenchOptions): Promise<BenchOutput> {
  const started = performance.now();
  const load0 = loadavg();
  const notes: string[] = [];
  if (o.installPeers && !o.onlyOurs) installPeers(o.say);
  const exe = meshHostExecutable();
  notes.push(exe.note);
  const dropped = dropCached([exe.file, PINNED_NODE]);
  if (dropped.length)
    notes.push(
      `The page cache of ${dropped.map((f) => relative(REPO, f)).join(" and ")} was dropped first: a file just written (a build, an install) is mapped in large folios and reads ~17 MB more RSS until then.`,
    );
  notes.push(
    `In-process rows run inside this bench process (Node ${process.version} through tsx) on the working tree's src/, which may differ from what dist/mesh-host was built from.`,
  );
  const runners: Runner[] = [
    executableRunner(exe),
    floorProcessRunner(),
    inProcessRunner,
    floorInProcessRunner,
  ];
  if (!o.onlyOurs)
    for (const p of peers({ quick: o.quick })) {
      if (p.runner) runners.push(o.quick && p.runner.reps ? { ...p.runner, reps: 1 } : p.runner);
      if (p.skipped) notes.push(`${p.name}: skipped — ${p.skipped}`);
    }
  const results: ToolResult[] = [];
  for (const n of o.sizes) {
    const ws = workspace(n);
    try {
      for (const r of runners) {
        if (r.maxN !== undefined && n > r.maxN) {
          if (!notes.some((x) => x.startsWith(`${r.name}:`)))
            notes.push(`${r.name}: ${r.maxNWhy ?? `N ≤ ${r.maxN} only`}`);
          continue;
        }
        o.say(`bench: ${r.name} at N = ${formatCount(n)}`);
        // a scenario stops repeating once its runs took this long: the full run stays under fifteen minutes
        results.push(await measureTool(r, ws, { reps: o.reps, budgetMs: o.quick ? 4_000 : 15_000 }));
      }
    } finally {
      ws.cleanup();
    }
  }
  o.say("bench: cold start, sizes");
  const cold = await coldStart(exe, o.coldRuns);
  const size = sizes(exe);
  const notYet = o.skipLink ? null : await runNotYet(exe);
  let mesh: MeshResults | { skipped: string };
  if (o.skipLink) mesh = { skipped: "not asked for (--skip-link)" };
  else if (notYet) mesh = { skipped: `not yet: ${notYet}` };
  else
    mesh = await meshRows(exe, { idleS: o.idleS, pushes: o.pushes, leak: o.leak, say: o.say }).catch(
      (e: Error) => ({
        skipped: `the link rows failed: ${e.message}`,
      }),
    );
  const targets = targetsOf({ results, exeName: exe.label, coldStart: cold, mesh, size });
  for (const r of results)
    for (const [s, sc] of Object.entries(r.scenarios))
      for (const f of sc.failed) notes.push(`failed (${s}, N = ${r.n}): ${f}`);
  const machine = {
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? "unknown",
    memoryBytes: totalmem(),
    kernel: release(),
    loadavgAtStart: load0.map((x) => Number(x.toFixed(2))),
    loadavgAtEnd: loadavg().map((x) => Number(x.toFixed(2))),
  };
  const date = new Date().toISOString();
  const markdown = [
    `## mesh-host bench${o.quick ? " (--quick)" : ""}: ${date.slice(0, 16).replace("T", " ")} UTC`,
    "",
    `${machine.cores} cores (${machine.cpu}), ${Math.round(machine.memoryBytes / 2 ** 30)} GiB, Linux ${machine.kernel}; load average ${machine.loadavgAtStart.join(" ")} at the start, ${machine.loadavgAtEnd.join(" ")} at the end. Files of 200 bytes, mode 0644, 100 to a directory, under a temp root.`,
    "",
    ...o.sizes.flatMap((n) => [toolsTable(results, n), ""]),
    "Medians (runs: up to " +
      `${o.reps} for ours; fewer for peers that take seconds, marked "1 run"). ×: over the floor of the same kind measured in this run — whole processes over \`floor (process)\` (the pinned Node running a serial loop: temp + write + fchmod + fsync + rename per file, one fsync per directory; lstat + read + sha256 to check), in-process over \`floor (in-process)\`. Peak RSS by \`/usr/bin/time -f %M\` (or VmHWM), largest over the runs.`,
    "",
    otherTable(cold, size, mesh),
    "",
    "### Targets (issue 22)",
    "",
    targetsTable(targets),
    "",
    ...notes.map((n) => `- ${n}`),
    "",
    `Took ${formatMs(performance.now() - started)}.`,
  ].join("\n");
  const json = {
    date,
    quick: o.quick,
    machine,
    executable: exe,
    sizes: o.sizes,
    results,
    coldStart: cold,
    size,
    mesh,
    targets,
    notes,
  };
  return { markdown, json, svg: plot(results, date, machine.cores) };
}

function otherTable(
  cold: ColdStart | { skipped: string },
  size: Sizes,
  mesh: MeshResults | { skipped: string },
): string {
  const rows: string[][] = [];
  if ("skipped" in cold) rows.push(["start-up, `mesh-host version` and `plan`", cold.skipped]);
  else {
    rows.push([
      `pinned \`node -e 0\` (median of ${cold.runs}, interleaved with the two below)`,
      `${formatMs(cold.node.ms)}, peak ${formatKb(cold.node.peakKb)}`,
    ]);
    for (const [what, s] of [
      ["`mesh-host version`", cold.version],
      [`\`mesh-host plan\` of ${PLAN_RESOURCES} resources`, cold.plan],
    ] as const)
      rows.push([
        what,
        `${formatMs(s.ms)}, peak ${formatKb(s.peakKb)}: ×${s.ratio.toFixed(2)} \`node -e 0\``,
      ]);
  }
  rows.push([
    "executable size",
    size.exe ? `${formatBytes(size.exe.bytes)} (${relative(REPO, size.exe.file)})` : "no dist/mesh-host",
  ]);
  rows.push([
    "package size",
    size.packages.length
      ? size.packages.map((p) => `${formatBytes(p.bytes)} (${p.file})`).join(", ")
      : "no dist/*.pkg.tar.zst",
  ]);
  if ("skipped" in mesh) rows.push(["link through the mesh double", mesh.skipped]);
  else {
    rows.push(["`run` → first heartbeat", formatMs(mesh.firstHeartbeatMs)]);
    rows.push([
      `push-to-applied, 10-file declaration (${mesh.latencyMs.n} pushes)`,
      `p50 ${formatMs(mesh.latencyMs.p50)}, p90 ${formatMs(mesh.latencyMs.p90)}, p99 ${formatMs(mesh.latencyMs.p99)}`,
    ]);
    rows.push([`idle RSS after ${mesh.idleS} s`, formatKb(mesh.idleRssKb)]);
    rows.push([
      `messages over the ${mesh.idleS} s idle window`,
      `host's connection: ${mesh.idleMessages.host ?? "?"} (heartbeats heard: ${mesh.heartbeatsInIdle}); whole server: ${mesh.idleMessages.server}`,
    ]);
    rows.push([
      `RSS after ${formatCount(mesh.leak.pushed)} more declarations`,
      `${formatKb(mesh.leak.rssBeforeKb)} → ${formatKb(mesh.leak.rssMidKb)} (half way) → ${formatKb(mesh.leak.rssAfterKb)}`,
    ]);
    if (mesh.launched)
      rows.push([
        "`run` started as the launcher starts it (the binary's digests in the environment)",
        `first heartbeat ${formatMs(mesh.launched.firstHeartbeatMs)}; RSS after ${mesh.launched.afterS} s ${formatKb(mesh.launched.rssKb)}`,
      ]);
  }
  return markdownTable(["what", "measured"], rows);
}

/** An axis tick in ms as a person reads it: "500 µs", "20 ms", "1 s", "200 s". */
export function tickMs(ms: number): string {
  const round = (v: number) => Number(v.toPrecision(3)).toString();
  if (ms < 1) return `${round(ms * 1000)} µs`;
  if (ms < 1000) return `${round(ms)} ms`;
  return `${round(ms / 1000)} s`;
}

/** Time against N, log–log, one panel per scenario, one line per tool. */
export function plot(results: readonly ToolResult[], date: string, cores: number): string {
  const tools = [...new Set(results.map((r) => r.tool))];
  return figure({
    title: "mesh-host bench: time against N (log–log)",
    subtitle: `${date.slice(0, 10)}, ${cores} cores; medians; files of 200 bytes, mode 0644`,
    xLabel: "N (files)",
    yLabel: "time (median)",
    formatX: (x) => formatCount(x),
    formatY: tickMs,
    panels: SCENARIOS.map((s) => ({
      title: SCENARIO_TITLES[s],
      series: tools.map((tool) => ({
        name: tool,
        points: results
          .filter((r) => r.tool === tool && r.scenarios[s]?.runsMs.length)
          .map((r) => ({ x: r.n, y: r.scenarios[s]!.medianMs })),
      })),
    })),
  });
}

export function writeOutputs(out: BenchOutput, dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const files = [join(dir, "results.json"), join(dir, "scaling.svg")];
  writeFileSync(files[0]!, `${JSON.stringify(out.json, null, 1)}\n`);
  writeFileSync(files[1]!, out.svg);
  return files;
}

async function main(): Promise<void> {
  // where the bench is: an updating line on a terminal (each step's "bench: " said once), plain lines off one
  const line = progress("bench");
  const say = (text: string) => line.step(text.replace(/^bench: /, ""));
  const o = optionsFrom(process.argv.slice(2), say);
  const out = await runBench(o);
  line.clear();
  const files = writeOutputs(out, o.outDir);
  process.stdout.write(
    `${out.markdown}\n\nWrote ${files.map((f) => relative(process.cwd(), f)).join(" and ")}.\n`,
  );
}

if (process.argv[1]?.endsWith("bench.ts")) await main();
