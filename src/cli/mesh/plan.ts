// `mesh plan TARGETS FILE`: each node's plan printed the way `plan` prints it, then the fleet at a glance: who
// would change and by how much, who would refuse, who did not answer. Nothing is sent through DECLARE and no
// serial is used, here or on a node.
import {
  askPlans,
  composePlans,
  JobLog,
  type MeshDir,
  newJob,
  type PlanHeard,
  type State,
  withState,
} from "../../mesh/index.ts";
import type { PlanAnswer } from "../../vocabulary/index.ts";
import { changesTable, writeJson, writeOut } from "../output.ts";
import { readGivenSecrets } from "../unseal.ts";
import type { MeshArgs } from "./args.ts";
import { warnLine } from "./jobs.ts";
import { readDeclaration, targetsGiven, wordsGiven } from "./push.ts";

const changing = (a: PlanAnswer) => a.plan.filter((l) => l.did !== "unchanged" && l.did !== "skipped");

export async function planCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const { names, file } = wordsGiven(mesh, args, "plan");
  const input = { file: readDeclaration(file), secrets: readGivenSecrets(args.secret) };
  const { heard, job } = await withState(mesh, async (state) => {
    const asked = await composePlans(state, await targetsGiven(state, args, names), input, args.diff);
    const answers = await askPlans(mesh, state, asked, args.waitS * 1000);
    return { heard: answers, job: await recordPlan(mesh, state, input.file, answers) };
  });
  if (args.json) writeJson({ job, nodes: heard.map(jsonOf), summary: summaryOf(heard) });
  else {
    for (const h of heard) writeOut(nodeText(h, args.verbose));
    writeOut(`${fleetTable(heard)}job ${job} (mesh-host mesh job ${job})`);
  }
  if (heard.some((h) => h.answer?.outcome === "refused")) return 2;
  if (heard.some((h) => !h.answer)) return 3;
  return 0;
}

/** The plan as a job: each node planned (its steps, without diffs), refused, or silent. */
async function recordPlan(
  mesh: MeshDir,
  state: State,
  file: Record<string, unknown>,
  heard: PlanHeard[],
): Promise<string> {
  const job = newJob(
    "plan",
    file,
    heard.map((h) => ({ node: h.node, serial: null })),
  );
  for (const h of heard)
    job.nodes[h.node] = h.answer
      ? {
          outcome: h.answer.outcome,
          serial: null,
          at: new Date().toISOString(),
          steps: h.answer.plan.map(({ diff: _d, ...step }) => step),
          refusals: h.answer.refusals,
        }
      : { ...job.nodes[h.node]!, outcome: "silent", detail: h.why };
  job.finished_at = new Date().toISOString();
  await (await JobLog.open(mesh, state.bus, warnLine("mesh plan"))).start(job);
  return job.id;
}

function jsonOf(h: PlanHeard) {
  if (!h.answer) return { node: h.node, outcome: "silent", silent: h.silent, why: h.why };
  const { node, outcome, plan, refusals, notes } = h.answer;
  return { node, outcome, plan, refusals, ...(notes ? { notes } : {}) };
}

function summaryOf(heard: PlanHeard[]) {
  const answered = heard.flatMap((h) => (h.answer ? [h.answer] : []));
  return {
    would_change: answered.filter((a) => a.outcome === "planned" && changing(a).length).map((a) => a.node),
    unchanged: answered.filter((a) => a.outcome === "planned" && !changing(a).length).map((a) => a.node),
    refused: answered.filter((a) => a.outcome === "refused").map((a) => a.node),
    silent: heard.filter((h) => !h.answer).map((h) => h.node),
  };
}

/** One node's plan, as `plan` prints it, headed by its name; its refusals or its silence in one line each. */
function nodeText(h: PlanHeard, verbose: boolean): string {
  if (!h.answer) return `${h.node}: ${h.why}\n`;
  const a = h.answer;
  const notes = (a.notes ?? []).map((n) => `  note: ${n}\n`).join("");
  if (a.outcome === "refused") {
    const lines = a.refusals.map((r) => `  refused: ${r.id}${r.field ? `.${r.field}` : ""}: ${r.reason}\n`);
    return `${h.node}: would refuse it\n${lines.join("")}${notes}`;
  }
  return `${h.node}: plan (nothing changed):\n${changesTable(a.plan, verbose)}${notes}`;
}

/** "1 created, 2 updated, 4 unchanged", in the order the steps first say each. */
function counts(a: PlanAnswer): string {
  const n = new Map<string, number>();
  for (const l of a.plan) n.set(l.did, (n.get(l.did) ?? 0) + 1);
  return [...n].map(([did, k]) => `${k} ${did}`).join(", ") || "nothing declared";
}

function fleetTable(heard: PlanHeard[]): string {
  const rows = heard.map((h) => {
    if (!h.answer) return [h.node, "-", h.silent === "offline" ? `offline: ${h.why}` : h.why];
    const a = h.answer;
    if (a.outcome === "refused") return [h.node, "-", `refused: ${a.refusals.length} refusal(s)`];
    return [h.node, String(changing(a).length), counts(a)];
  });
  const head = ["NODE", "CHANGES", "PLAN"];
  const widths = head.map((t, i) => Math.max(t.length, ...rows.map((r) => r[i]!.length)));
  const line = (c: string[]) =>
    `${c
      .map((v, i) => v.padEnd(widths[i]!))
      .join("  ")
      .trimEnd()}\n`;
  const s = summaryOf(heard);
  const tail = [
    `${s.would_change.length} of ${heard.length} node(s) would change`,
    ...(s.refused.length ? [`${s.refused.length} would refuse it`] : []),
    ...(s.silent.length ? [`${s.silent.length} did not answer (${s.silent.join(", ")})`] : []),
  ].join("; ");
  return `\n${[head, ...rows].map(line).join("")}${tail}\n`;
}
