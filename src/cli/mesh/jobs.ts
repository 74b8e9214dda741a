// `mesh jobs`, `mesh job ID` and `mesh report NODE [--serial N]`: what was pushed, planned or rolled out where,
// and what each node said, read from the bus (the jobs bucket, the REPORTS stream), so any operator's machine
// sees the same history.
import {
  checkNodeName,
  connectBus,
  type Job,
  type JobNode,
  jobsBucket,
  listJobs,
  type MeshDir,
  openState,
  outcomeCounts,
  type Pushed,
  replacedLine,
  reportOf,
} from "../../mesh/index.ts";
import { printable } from "../../printable.ts";
import type { Report } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { summary, table, writeJson, writeOut } from "../output.ts";
import type { MeshArgs } from "./args.ts";

export const warnLine = (prefix: string) => (line: string) => process.stderr.write(`${prefix}: ${line}\n`);

/** The job with each node's outcome from its report (silent when none came; still pending after --wait-s 0). */
export function settledJob(job: Job, pushed: Pushed[], waitS: number): Job {
  const nodes = { ...job.nodes };
  for (const p of pushed) {
    if (!p.report && waitS === 0) continue;
    nodes[p.node] = p.report
      ? {
          outcome: p.report.outcome,
          serial: p.serial,
          at: p.report.finished_at,
          steps: p.report.steps,
          refusals: p.report.refusals,
        }
      : p.replacedBy
        ? { ...nodes[p.node]!, outcome: "superseded", detail: replacedLine(p.replacedBy) }
        : { ...nodes[p.node]!, outcome: "silent", detail: `no report within ${waitS} s` };
  }
  return { ...job, nodes, finished_at: new Date().toISOString() };
}

function cells(rows: string[][], head: string[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (c: string[]) =>
    `${c
      .map((v, i) => v.padEnd(widths[i]!))
      .join("  ")
      .trimEnd()}\n`;
  return [head, ...rows].map(line).join("");
}

export async function jobsCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  if (args.positionals.length) throw new UsageError("mesh jobs takes no argument (mesh job ID shows one)");
  mesh.config();
  const bus = await connectBus(mesh);
  try {
    const jobs = await listJobs(await jobsBucket(mesh, bus));
    if (args.json)
      writeJson({ jobs: jobs.map(({ rollout, ...j }) => ({ ...j, state: rollout?.state ?? null })) });
    else if (!jobs.length) writeOut("no jobs yet: every push, plan and rollout is one");
    else
      writeOut(
        cells(
          jobs.map((j) => [
            j.id,
            j.kind,
            j.started_at.replace(/\.\d+Z$/, "Z"),
            String(j.targets.length),
            j.rollout?.state ?? (j.finished_at ? "done" : "running"),
            outcomeCounts(j),
          ]),
          ["JOB", "KIND", "STARTED", "NODES", "STATE", "OUTCOMES"],
        ),
      );
    return 0;
  } finally {
    await bus.close();
  }
}

/**
 * A job as it is printed: each node's previous declaration (what a revert puts back) keeps its secrets sealed to
 * the node, and a sealed value is never shown: only the names of the secrets.
 */
export function shownJob(job: Job): Job {
  if (!job.rollout) return job;
  const previous = Object.fromEntries(
    Object.entries(job.rollout.previous).map(([node, body]) => {
      const secrets = body?.secrets as Record<string, unknown> | undefined;
      if (!body || !secrets) return [node, body];
      return [
        node,
        { ...body, secrets: Object.fromEntries(Object.keys(secrets).map((k) => [k, "(sealed)"])) },
      ];
    }),
  );
  return { ...job, rollout: { ...job.rollout, previous } };
}

export async function jobCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [id, ...extra] = args.positionals;
  if (!id || extra.length) throw new UsageError("mesh job takes one ID (mesh jobs lists them)");
  const job = await readJob(mesh, id);
  if (args.json) writeJson(shownJob(job));
  else writeOut(jobText(job));
  return 0;
}

export async function readJob(mesh: MeshDir, id: string): Promise<Job> {
  if (!/^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$/.test(id))
    throw new UsageError(`"${printable(id, 40)}" is not a job id (20261204-123700-ab12)`);
  mesh.config();
  const bus = await connectBus(mesh);
  try {
    const entry = await (await jobsBucket(mesh, bus)).get(id);
    if (!entry) throw new UsageError(`no job ${id} in this mesh (mesh jobs lists the ${"newest"})`);
    return entry.value;
  } finally {
    await bus.close();
  }
}

/** The job at a glance: one row a node, then each failed step and refusal by node. */
export function jobText(job: Job): string {
  const head = `job ${job.id}: ${job.kind} to ${job.targets.length} node(s), started ${job.started_at}${job.finished_at ? `, finished ${job.finished_at}` : ""}`;
  const rows = job.targets.map((n) => {
    const o = job.nodes[n]!;
    return [n, o.outcome, o.serial === null ? "-" : String(o.serial), o.detail ?? stepCounts(o)];
  });
  const why = job.targets.flatMap((n) => failures(n, job.nodes[n]!));
  return `${head}\n${cells(rows, ["NODE", "OUTCOME", "SERIAL", "STEPS"])}${why.join("")}`;
}

function stepCounts(o: JobNode): string {
  const n = new Map<string, number>();
  for (const s of o.steps) n.set(s.did, (n.get(s.did) ?? 0) + 1);
  return [...n].map(([d, k]) => `${k} ${d}`).join(", ") || "-";
}

function failures(node: string, o: JobNode): string[] {
  const failed = o.steps.filter((s) => s.did === "failed");
  return [
    ...(failed.length ? [`${node} failed:\n${table(failed)}`] : []),
    ...o.refusals.map((r) => `${node} refused: ${r.id}${r.field ? `.${r.field}` : ""}: ${r.reason}\n`),
  ];
}

export async function reportCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [node, ...extra] = args.positionals;
  if (extra.length) throw new UsageError("mesh report takes one NAME");
  checkNodeName(node);
  mesh.config();
  const state = await openState(mesh);
  try {
    const found = await reportOf(state, node!, args.serial);
    if (!found) {
      const which = args.serial === null ? "" : ` for serial ${args.serial}`;
      throw new UsageError(`node ${node} has no report${which} on the bus (REPORTS keeps a month)`);
    }
    if (args.json) writeJson({ node, serial: found.serial, report: found.report });
    else writeOut(fullReport(node!, found.serial, found.report));
    return 0;
  } finally {
    await state.bus.close();
  }
}

/** Every step with its detail, then holds, refusals and notes: all the node said, each line printable. */
function fullReport(node: string, serial: number | null, r: Report): string {
  const p = (s: string) => printable(s, 1000);
  const steps = r.steps.map((s) => ({ id: p(s.id), type: p(s.type), did: s.did, detail: p(s.detail) }));
  const lines = [
    `${node}: serial ${serial ?? "?"}, ${r.outcome}, ${r.started_at} to ${r.finished_at} (host ${p(r.host.version)} on ${p(r.host.os)}${r.mode ? `, ${r.mode}` : ""})`,
    `${table(steps)}${summary(r)}`,
    ...r.holds.map((h) => `held: ${p(h.id)} ${p(h.path)}`),
    ...r.refusals.map((x) => `refused: ${p(x.id)}${x.field ? `.${p(x.field)}` : ""}: ${p(x.reason)}`),
    ...(r.notes ?? []).map((n) => `note: ${p(n)}`),
  ];
  return lines.join("\n");
}
