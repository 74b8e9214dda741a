// The chaos suite (issue 9): every scenario in the order of the issue, and the table a run ends with.
// `npm test` runs each scenario's short form through test/chaos-*.test.ts; `npm run test:chaos [-- --long]`
// runs them all here (scripts/chaos.ts) and prints the table.

import { busFaults } from "./bus-faults.ts";
import { concurrency } from "./concurrency.ts";
import { crashDuringApply } from "./crash-apply.ts";
import { crashDuringSave } from "./crash-save.ts";
import { hostileGenerated } from "./hostile.ts";
import { hostileNamed } from "./hostile-named.ts";
import { hostileNode } from "./hostile-node.ts";
import { leastPrivilege } from "./privilege.ts";
import { replayed } from "./replay.ts";
import { offlineSecrets } from "./secrets.ts";
import { secretsFullFlow } from "./secrets-flow.ts";
import type { Outcome, Scenario } from "./support.ts";
import { surface } from "./surface.ts";

export type { Outcome, RunOptions, Scenario } from "./support.ts";

export const SCENARIOS: Scenario[] = [
  crashDuringApply,
  crashDuringSave,
  busFaults,
  hostileGenerated,
  hostileNamed,
  concurrency,
  surface,
  offlineSecrets,
  secretsFullFlow,
  leastPrivilege,
  replayed,
  hostileNode,
];

export interface Row {
  scenario: Scenario;
  outcome: Outcome;
  seconds: number;
}

/** The table: scenario, tried, held, and a word for the state of each. */
export function table(rows: Row[]): string {
  const head = ["scenario", "tried", "held", "result", "time"];
  const cells = rows.map(({ scenario, outcome, seconds }) => [
    scenario.title,
    String(outcome.tried),
    String(outcome.held),
    outcome.held === outcome.tried && !outcome.failures.length ? "held" : "FAILED",
    `${seconds.toFixed(1)} s`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) =>
    `| ${c.map((v, i) => (i === 1 || i === 2 || i === 4 ? v.padStart(widths[i]!) : v.padEnd(widths[i]!))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => `${i === 1 || i === 2 || i === 4 ? "-".repeat(w + 1) : `-${"-".repeat(w)}`}${i === 1 || i === 2 || i === 4 ? ":" : "-"}`).join("|")}|`;
  return [line(head), rule, ...cells.map(line)].join("\n");
}

/** The failures and notes under the table, scenario by scenario. */
export function details(rows: Row[]): string {
  const out: string[] = [];
  for (const { scenario, outcome } of rows) {
    if (!outcome.failures.length && !outcome.notes.length) continue;
    out.push(`\n${scenario.title}:`);
    for (const n of outcome.notes) out.push(`  note: ${n}`);
    for (const f of outcome.failures) out.push(`  FAILED ${f}`);
  }
  return out.join("\n");
}
