// Summarise a V8 .cpuprofile (from `node --cpu-prof`): self and total time by function, heaviest first.
// usage: tsx scripts/bench/profile.ts FILE.cpuprofile [--top 25]
import { readFileSync } from "node:fs";
import { basename } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface Hot {
  name: string;
  selfMs: number;
  totalMs: number;
}

const label = (n: ProfileNode): string => {
  const f = n.callFrame;
  const where = f.url ? `${basename(f.url)}:${f.lineNumber + 1}` : "";
  return `${f.functionName || "(anonymous)"} ${where}`.trim();
};

/** Self time (ms) and inclusive time (ms) per function, summed over every node with the same label. */
export function hotFunctions(p: Profile): Hot[] {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  p.samples.forEach((id, i) => {
    const ms = (p.timeDeltas[i] ?? 0) / 1000;
    const node = byId.get(id);
    if (!node) return;
    self.set(label(node), (self.get(label(node)) ?? 0) + ms);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const l = label(byId.get(at)!);
      if (seen.has(l)) continue;
      seen.add(l);
      total.set(l, (total.get(l) ?? 0) + ms);
    }
  });
  return [...total.entries()]
    .map(([name, totalMs]) => ({ name, selfMs: self.get(name) ?? 0, totalMs }))
    .sort((a, b) => b.selfMs - a.selfMs);
}

function main(argv: string[]): void {
  const [file] = argv;
  if (!file) throw new Error("usage: profile.ts FILE.cpuprofile [--top N]");
  const top = Number(argv[argv.indexOf("--top") + 1] ?? 25) || 25;
  const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const hot = hotFunctions(p);
  const fmt = (h: Hot) => `${h.selfMs.toFixed(1).padStart(8)} ${h.totalMs.toFixed(1).padStart(8)}  ${h.name}`;
  console.log(`profile ${(p.endTime - p.startTime) / 1000} ms\n    self    total  function`);
  for (const h of hot.slice(0, top)) console.log(fmt(h));
  console.log(`\nby inclusive time:`);
  for (const h of [...hot].sort((a, b) => b.totalMs - a.totalMs).slice(0, top)) console.log(fmt(h));
}

if (process.argv[1] && import.meta.url.endsWith(basename(process.argv[1]))) main(process.argv.slice(2));
