// The bench's pure parts (stats, the SVG writer, the floor) and one tiny `--quick` run end to end.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { plot, tickMs } from "../../scripts/bench/bench.ts";
import {
  benchFiles,
  contentOf,
  countRight,
  driftOne,
  FILE_BYTES,
  tempDir,
  workspace,
} from "../../scripts/bench/fixture.ts";
import { floorCheck, floorFirst } from "../../scripts/bench/floor.ts";
import type { ToolResult } from "../../scripts/bench/scenarios.ts";
import {
  formatKb,
  formatMs,
  formatRatio,
  linearity,
  markdownTable,
  median,
  percentile,
  verdict,
} from "../../scripts/bench/stats.ts";
import { decadeRange, escapeXml, figure, logScale, logTicks } from "../../scripts/bench/svg.ts";

const REPO = join(import.meta.dirname, "../..");
const cleanup: string[] = [];
afterAll(() => {
  for (const d of cleanup) rmSync(d, { recursive: true, force: true });
});

/** Every opened tag is closed in order: enough to catch a writer that emits broken XML. */
function balanced(xml: string): boolean {
  const stack: string[] = [];
  for (const m of xml.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
    const [, close, name, self] = m;
    if (self) continue;
    if (close) {
      if (stack.pop() !== name) return false;
    } else stack.push(name!);
  }
  return stack.length === 0;
}

describe("stats", () => {
  it("takes medians and percentiles by interpolation", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
    const hundred = Array.from({ length: 101 }, (_, i) => i);
    expect(percentile(hundred, 50)).toBe(50);
    expect(percentile(hundred, 99)).toBe(99);
    expect(percentile([10, 20], 90)).toBeCloseTo(19);
  });

  it("prints durations, sizes and ratios for a person", () => {
    expect(formatMs(0.84)).toBe("840 µs");
    expect(formatMs(12.34)).toBe("12 ms");
    expect(formatMs(4.56)).toBe("4.6 ms");
    expect(formatMs(1240)).toBe("1.24 s");
    expect(formatMs(-76)).toBe("−76 ms");
    expect(formatMs(465_000)).toBe("465 s");
    expect(formatKb(51_200)).toBe("50 MB");
    expect(formatKb(null)).toBe("—");
    expect(formatRatio(300, 100)).toBe("×3.0");
    expect(formatRatio(50, 100)).toBe("×0.50");
    expect(formatRatio(1, 0)).toBe("—");
    expect(tickMs(1000)).toBe("1 s");
    expect(tickMs(0.5)).toBe("500 µs");
  });

  it("says whether a target is met and by how much it is missed", () => {
    expect(verdict(90, 100)).toBe("met");
    expect(verdict(300, 100)).toBe("missed (3.0× the target)");
    expect(verdict(2, 4, true)).toBe("missed (2.0× the target)");
    expect(verdict(Number.NaN, 4)).toBe("not measured");
  });

  it("judges linearity from the marginal cost per item", () => {
    const flat = linearity([
      { n: 100, ms: 50 },
      { n: 1000, ms: 140 },
      { n: 10_000, ms: 1040 },
    ]);
    expect(flat?.linear).toBe(true);
    const quadratic = linearity([
      { n: 100, ms: 1 },
      { n: 1000, ms: 100 },
      { n: 10_000, ms: 10_000 },
    ]);
    expect(quadratic?.linear).toBe(false);
    expect(linearity([{ n: 1, ms: 1 }])).toBeNull();
  });

  it("writes markdown tables with | escaped", () => {
    expect(markdownTable(["a", "b"], [["1", "x|y"]])).toBe("| a | b |\n| --- | --- |\n| 1 | x\\|y |");
  });
});

describe("the SVG writer", () => {
  it("spans whole decades and ticks them", () => {
    expect(decadeRange(120, 9000)).toEqual([100, 10_000]);
    expect(logTicks(100, 10_000)).toEqual([100, 200, 500, 1000, 2000, 5000, 10_000]);
    expect(logTicks(1, 100_000)).toEqual([1, 10, 100, 1000, 10_000, 100_000]);
    const s = logScale(1, 100, 0, 200);
    expect(s(1)).toBe(0);
    expect(s(10)).toBeCloseTo(100);
    expect(s(100)).toBe(200);
    expect(escapeXml(`<a & "b">`)).toBe("&lt;a &amp; &quot;b&quot;&gt;");
  });

  it("draws one line per series in each panel, a legend, and labelled axes", () => {
    const svg = figure({
      title: "time <against> N",
      xLabel: "N (files)",
      yLabel: "time",
      panels: [
        {
          title: "one",
          series: [
            {
              name: "a & b",
              points: [
                { x: 100, y: 5 },
                { x: 1000, y: 50 },
              ],
            },
          ],
        },
        {
          title: "two",
          series: [
            {
              name: "c",
              points: [
                { x: 100, y: 1 },
                { x: 1000, y: 2 },
                { x: 0, y: 3 },
              ],
            },
          ],
        },
      ],
    });
    expect(svg.startsWith("<svg ")).toBe(true);
    expect(balanced(svg)).toBe(true);
    expect(svg.match(/<path /g)).toHaveLength(2);
    expect(svg).toContain("time &lt;against&gt; N");
    expect(svg).toContain(">a &amp; b</text>");
    expect(svg.match(/>N \(files\)</g)).toHaveLength(2);
    expect(svg).toContain("rotate(-90"); // the y label
  });

  it("plots bench results by scenario and tool", () => {
    const r = (tool: string, n: number, ms: number): ToolResult => ({
      tool,
      kind: "process",
      n,
      peakKb: null,
      scenarios: {
        first: { runsMs: [ms], medianMs: ms, peakKb: null, failed: [] },
        noop: { runsMs: [ms / 2], medianMs: ms / 2, peakKb: null, failed: [] },
        drift: { runsMs: [], medianMs: Number.NaN, peakKb: null, failed: ["x"] },
      },
    });
    const svg = plot(
      [r("ours", 100, 10), r("ours", 1000, 40), r("peer", 100, 90)],
      "2026-01-01T00:00:00Z",
      2,
    );
    expect(balanced(svg)).toBe(true);
    expect(svg.match(/<path /g)).toHaveLength(4); // two tools × two scenarios with points; drift has none
    for (const t of ["first apply", "no-op", "drift repair", "ours", "peer", "1,000"])
      expect(svg).toContain(t);
  });
});

describe("the floor and the fixture", () => {
  it("writes every file atomically, finds nothing to do again, and puts back a file edited by hand", () => {
    const ws = workspace(150);
    cleanup.push(ws.dir);
    const { root } = ws.fresh("floor");
    expect(contentOf(7)).toHaveLength(FILE_BYTES);
    expect(benchFiles(150).at(-1)!.path).toBe("/bench/d001/f00149.conf");
    expect(floorFirst(root, ws.declFile)).toBe(150);
    expect(countRight(root, ws.files)).toBe(150);
    expect(floorCheck(root, ws.declFile)).toBe(0);
    driftOne(root, ws.files[42]!, 1);
    expect(countRight(root, ws.files)).toBe(149);
    expect(floorCheck(root, ws.declFile)).toBe(1);
    expect(countRight(root, ws.files)).toBe(150);
  });
});

describe("npm run bench -- --quick, tiny", () => {
  it("runs end to end and writes the table, results.json and scaling.svg", () => {
    const out = tempDir("mesh-bench-test-");
    cleanup.push(out);
    const tsx = join(REPO, "node_modules/tsx/dist/cli.mjs");
    const args = ["--quick", "--only-ours", "--n", "20,40", "--reps", "1", "--cold-runs", "2"];
    const link = ["--idle-s", "0", "--pushes", "3", "--leak", "3"];
    const r = spawnSync(process.execPath, [tsx, "scripts/bench/bench.ts", ...args, ...link, "--out", out], {
      cwd: REPO,
      encoding: "utf8",
      timeout: 240_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("| N = 20 | first apply | no-op | drift repair | peak RSS |");
    expect(r.stdout).toMatch(/\| mesh-host \((executable|tsx, not built)\) \| [0-9.]+ (ms|s) ×/);
    expect(r.stdout).toContain("### Targets (issue 22)");
    expect(r.stdout).toMatch(/\| `mesh-host version` \| ≤ ×1.5 `node -e 0` \| ×[0-9.]+ /);
    expect(r.stdout).not.toContain("failed (");
    const json = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
    expect(json.machine.cores).toBeGreaterThan(0);
    expect(json.machine.memoryBytes).toBeGreaterThan(0);
    expect(Date.parse(json.date)).not.toBeNaN();
    expect(json.results.length).toBe(8); // 4 of ours × 2 sizes
    expect(existsSync(join(out, "scaling.svg"))).toBe(true);
    expect(balanced(readFileSync(join(out, "scaling.svg"), "utf8"))).toBe(true);
  });
});

describe("npm run bench:fleet -- --simulated 20 --single-only", () => {
  it("simulates 20 real-protocol nodes on one server and prints every figure, no report lost", () => {
    const tsx = join(REPO, "node_modules/tsx/dist/cli.mjs");
    const args = ["scripts/bench/fleet.ts", "--simulated", "20", "--single-only"];
    const r = spawnSync(process.execPath, [tsx, ...args], {
      cwd: REPO,
      encoding: "utf8",
      timeout: 600_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("## one server, 20 simulated nodes");
    expect(r.stdout).toMatch(
      /node add \/ node rm at 20 nodes against at 10 .*executable add .*\(×[0-9.]+\).*the function alone: add .*\(×[0-9.]+\)/,
    );
    expect(r.stdout).toMatch(
      /a never-enrolled node's revocation alone \(ENROL's claims pushed again: \d+ entries at 20, \d+ at 10, before\): .*\(×[0-9.]+\)/,
    );
    expect(r.stdout).toMatch(/enrolled in .*every one heard/);
    expect(r.stdout).toMatch(/publish → report: p50 .* \(20\/20 reports\)/);
    expect(r.stdout).toMatch(/bus RSS .* a node; controller \(mesh up\) [0-9.]+ MB/);
    expect(r.stdout).toMatch(/server restarted: .* 20 dials, .*reports lost: 0$/m);
    expect(r.stdout).not.toContain("kept ");
  });
});
