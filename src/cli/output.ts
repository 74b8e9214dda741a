// Human output: what an apply changes and a summary; --json makes stdout one document and nothing else (every
// step, unchanged ones included). A long apply at a terminal shows a progress line on stderr.
import type { PlanLine } from "../apply/index.ts";
import { PROGRESS_AFTER_MS, PROGRESS_EVERY_MS } from "../defaults.ts";
// the one sanitiser (defined in the vocabulary, beside what it guards), alone: this file is loaded at start,
// before zod. Every text output of the CLI takes it from here.
import { printable } from "../printable.ts";
import type { Report } from "../vocabulary/index.ts";

type Line = PlanLine | Report["steps"][number];

export function writeOut(text: string): void {
  process.stdout.write(text.endsWith("\n") ? text : `${text}\n`);
}

export function writeJson(doc: unknown): void {
  writeOut(JSON.stringify(doc, null, 2));
}

/**
 * One line a step. Every cell is shown escaped: a report may come from a node (`mesh push`), and what a node
 * says must not drive the operator's terminal; a local apply's own words pass unchanged.
 */
export function table(given: readonly Line[]): string {
  if (!given.length) return "  (nothing declared)\n";
  const lines = given.map((l) => ({
    did: printable(l.did),
    type: printable(l.type),
    id: printable(l.id),
    detail: printable(l.detail),
  }));
  const w = (k: "did" | "type" | "id") => Math.max(...lines.map((l) => l[k].length));
  const [dw, tw, iw] = [w("did"), w("type"), w("id")];
  return lines
    .map((l) => `  ${l.did.padEnd(dw)}  ${l.type.padEnd(tw)}  ${l.id.padEnd(iw)}  ${l.detail}\n`)
    .join("");
}

/** `--diff`: each planned file's changes after the table, headed by its id. */
function diffs(lines: readonly Line[]): string {
  return lines
    .flatMap((l) => ("diff" in l && l.diff?.length ? [`diff ${l.id}:\n${l.diff.join("\n")}\n`] : []))
    .join("");
}

/**
 * The lines a person reads: what changes, and how many did not (listed only with --verbose). A no-op of 5,000
 * files is one line, not 10,005.
 */
export function changesTable(lines: readonly Line[], verbose: boolean): string {
  if (verbose || !lines.length) return table(lines) + diffs(lines);
  const shown = lines.filter((l) => l.did !== "unchanged");
  const quiet = lines.length - shown.length;
  return `${shown.length ? table(shown) : ""}${quiet ? `  (${quiet} unchanged; --verbose lists them)\n` : ""}${diffs(shown)}`;
}

/** The plan in words: before acting, or as all a dry run does. */
export function planText(plan: readonly PlanLine[], verbose: boolean, dryRun = false): string {
  return `${dryRun ? "plan (dry run, nothing changed)" : "plan"}:\n${changesTable(plan, verbose)}`;
}

/** The report in words: what was done, then the summary. */
export function reportText(report: Report, verbose: boolean): string {
  return `report:\n${changesTable(report.steps, verbose)}${summary(report)}`;
}

/** "applied: 3 created, 2 unchanged" — the line a person reads first. */
export function summary(report: Report): string {
  const counts = new Map<string, number>();
  for (const s of report.steps) counts.set(s.did, (counts.get(s.did) ?? 0) + 1);
  const parts = [...counts].map(([did, n]) => `${n} ${did}`);
  const holds = report.holds.length ? `; ${report.holds.length} held` : "";
  return printable(`${report.outcome}: ${parts.join(", ") || "nothing to do"}${holds}`);
}

export interface Progress {
  /** A step is done: `done` of `total`. */
  step(done: number, total: number): void;
  /** Take the line away (before stdout is written, and at the end). */
  clear(): void;
}

/**
 * A progress line for a person at a terminal: on `stream` only when it is a TTY, and only once the apply has
 * taken PROGRESS_AFTER_MS (a quick apply prints nothing extra). Never in --json, never into a pipe or a log.
 */
export function progress(enabled: boolean, stream: NodeJS.WritableStream & { isTTY?: boolean }): Progress {
  if (!enabled || !stream.isTTY) return { step() {}, clear() {} };
  const started = Date.now();
  let shown = false;
  let last = 0;
  const show = (text: string) => {
    stream.write(`\r\x1b[K${text}`);
    shown = true;
    last = Date.now();
  };
  const planning = setTimeout(() => show("planning"), PROGRESS_AFTER_MS);
  planning.unref();
  return {
    step(done, total) {
      const now = Date.now();
      if (now - started < PROGRESS_AFTER_MS || (now - last < PROGRESS_EVERY_MS && done < total)) return;
      show(`applying: ${done}/${total}`);
    },
    clear() {
      clearTimeout(planning);
      if (shown) stream.write("\r\x1b[K");
      shown = false;
    },
  };
}
