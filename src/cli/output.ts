// Human output: a short table of the plan or report; --json makes stdout one document and nothing else.
import type { PlanLine } from "../apply/index.ts";
import type { Report } from "../vocabulary/index.ts";

export function writeOut(text: string): void {
  process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
}

export function writeJson(doc: unknown): void {
  writeOut(JSON.stringify(doc, null, 2));
}

export function table(lines: PlanLine[] | Report["steps"]): string {
  if (!lines.length) return "  (nothing declared)\n";
  const w = (k: "did" | "type" | "id") => Math.max(...lines.map((l) => l[k].length));
  const [dw, tw, iw] = [w("did"), w("type"), w("id")];
  const rows = lines
    .map((l) => `  ${l.did.padEnd(dw)}  ${l.type.padEnd(tw)}  ${l.id.padEnd(iw)}  ${l.detail}\n`)
    .join("");
  return rows + diffs(lines);
}

/** `--diff`: each planned file's changes after the table, headed by its id. */
function diffs(lines: (PlanLine | Report["steps"][number])[]): string {
  return lines
    .flatMap((l) => ("diff" in l && l.diff?.length ? [`diff ${l.id}:\n${l.diff.join("\n")}\n`] : []))
    .join("");
}

/** "applied: 3 created, 2 unchanged" — the line a person reads first. */
export function summary(report: Report): string {
  const counts = new Map<string, number>();
  for (const s of report.steps) counts.set(s.did, (counts.get(s.did) ?? 0) + 1);
  const parts = [...counts].map(([did, n]) => `${n} ${did}`);
  const holds = report.holds.length ? `; ${report.holds.length} held` : "";
  return `${report.outcome}: ${parts.join(", ") || "nothing to do"}${holds}`;
}
