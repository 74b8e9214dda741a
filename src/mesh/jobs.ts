// Every push, plan and rollout is a job: an id, the targets expected, then each node's outcome with its steps,
// kept in the KV bucket `mesh-jobs` (made when absent) so it survives `mesh up` restarts and is read from any
// operator's machine. The newest JOBS_KEPT are kept: each new job removes the oldest past that bound.
import { randomBytes } from "node:crypto";
import * as z from "zod";
import { JOBS_KEPT, KV_REPLICAS_MAX } from "../defaults.ts";
import { digestOf, NodeName, ReleaseVersion, ReportStep } from "../vocabulary/index.ts";
import { type Bus, firstLine, jsCall } from "./bus.ts";
import { Bucket } from "./kv.ts";
import type { MeshDir } from "./layout.ts";

export const JOBS_BUCKET = "mesh-jobs";

export const NodeOutcome = z.enum([
  "pending",
  "applied",
  "failed",
  "refused",
  "superseded",
  "planned",
  "silent",
  "reverted",
  "untouched",
]);
export type NodeOutcome = z.infer<typeof NodeOutcome>;

export const JobNode = z.strictObject({
  outcome: NodeOutcome,
  serial: z.number().int().nullable(),
  at: z.string().nullable(),
  steps: z.array(ReportStep),
  refusals: z.array(z.strictObject({ id: z.string(), field: z.string(), reason: z.string() })),
  /** One line: why it is silent, what a revert put back. */
  detail: z.string().optional(),
});
export type JobNode = z.infer<typeof JobNode>;

export const RolloutProgress = z.strictObject({
  waves: z.array(z.array(NodeName)),
  /** The wave in progress (0 is the canary when there is one); equal to waves.length when done. */
  wave: z.number().int().min(0),
  gate_s: z.number().int().min(0),
  max_failed: z.number().int().min(0),
  on_halt: z.enum(["revert", "stop"]),
  allow_removals: z.boolean(),
  state: z.enum(["running", "done", "halted", "aborted"]),
  halted_because: z.string().nullable(),
  /** FILE as given (secrets sealed per node at push time are not in it): what resume pushes again. */
  file: z.record(z.string(), z.unknown()),
  /** Each node's declaration before the rollout changed it: what a revert pushes again. */
  previous: z.record(NodeName, z.record(z.string(), z.unknown()).nullable()),
  /**
   * `mesh upgrade --to V`: each node is pushed its own previous declaration with `host.release` set to V (FILE is
   * not used), and the gate also waits for its heartbeat to show V, confirmed.
   */
  release: ReleaseVersion.optional(),
});
export type RolloutProgress = z.infer<typeof RolloutProgress>;

export const Job = z.strictObject({
  id: z.string().regex(/^[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$/),
  kind: z.enum(["push", "plan", "rollout"]),
  started_at: z.string(),
  finished_at: z.string().nullable(),
  /** The SHA-256 of FILE as given. */
  file_digest: z.string(),
  targets: z.array(NodeName),
  nodes: z.record(NodeName, JobNode),
  rollout: RolloutProgress.optional(),
});
export type Job = z.infer<typeof Job>;

/** `20261204-123700-ab12`: sorts by when it started. */
export function newJobId(now = new Date()): string {
  const t = now.toISOString().replace(/[-:]/g, "");
  return `${t.slice(0, 8)}-${t.slice(9, 15)}-${randomBytes(2).toString("hex")}`;
}

export const pendingNode = (serial: number | null = null): JobNode => ({
  outcome: "pending",
  serial,
  at: null,
  steps: [],
  refusals: [],
});

/** The jobs bucket, made when absent (replicated on every server, up to KV_REPLICAS_MAX). */
export async function jobsBucket(mesh: MeshDir, bus: Bus): Promise<Bucket<Job>> {
  const bucket = new Bucket(bus, JOBS_BUCKET, Job);
  const exists = await bus.jsm.streams.info(bucket.stream).then(
    () => true,
    () => false,
  );
  if (!exists) await bucket.ensure(Math.min(mesh.config().servers.length, KV_REPLICAS_MAX));
  return bucket;
}

/** A new job written, the oldest past JOBS_KEPT removed. */
export async function startJob(bus: Bus, bucket: Bucket<Job>, job: Job): Promise<void> {
  await bucket.put(job.id, job);
  const keys = await jobKeys(bus, bucket);
  // purged, not marked removed: a marker would still be a subject, and the bound would count it
  for (const old of keys.slice(0, Math.max(0, keys.length - JOBS_KEPT)))
    await jsCall(() => bus.jsm.streams.purge(bucket.stream, { filter: bucket.subject(old) }));
}

/** The ids held, oldest first (an id sorts by when it started). */
async function jobKeys(bus: Bus, bucket: Bucket<Job>): Promise<string[]> {
  const info = await jsCall(() =>
    bus.jsm.streams.info(bucket.stream, { subjects_filter: `$KV.${JOBS_BUCKET}.>` }),
  );
  return Object.keys(info.state.subjects ?? {})
    .map((subject) => subject.slice(`$KV.${JOBS_BUCKET}.`.length))
    .sort();
}

/** A job's node outcomes (and progress) written as they now stand. */
export async function saveJob(bucket: Bucket<Job>, job: Job): Promise<void> {
  await bucket.put(job.id, job);
}

/** Newest first. */
export async function listJobs(bucket: Bucket<Job>): Promise<Job[]> {
  // by when each started, to the millisecond: ids share a second, and their tails are random
  return (await bucket.entries())
    .map((e) => e.value)
    .sort((a, b) => b.started_at.localeCompare(a.started_at) || b.id.localeCompare(a.id));
}

/** How many nodes ended each way: `applied 3, failed 1`. */
export function outcomeCounts(job: Job): string {
  const n = new Map<string, number>();
  for (const node of Object.values(job.nodes)) n.set(node.outcome, (n.get(node.outcome) ?? 0) + 1);
  return [...n].map(([o, k]) => `${o} ${k}`).join(", ") || "no nodes";
}

/**
 * The jobs bucket as a command uses it: a job that cannot be written (a bus that refuses the bucket) is said on
 * `warn` and the command goes on; what it did to the nodes is still what it did.
 */
export class JobLog {
  private constructor(
    private readonly bus: Bus,
    private readonly bucket: Bucket<Job> | null,
    private readonly warn: (line: string) => void,
  ) {}

  static async open(mesh: MeshDir, bus: Bus, warn: (line: string) => void): Promise<JobLog> {
    try {
      return new JobLog(bus, await jobsBucket(mesh, bus), warn);
    } catch (e) {
      warn(`the job is not recorded: the bucket ${JOBS_BUCKET} cannot be made (${firstLine(e)})`);
      return new JobLog(bus, null, warn);
    }
  }

  async start(job: Job): Promise<void> {
    if (this.bucket) await startJob(this.bus, this.bucket, job).catch((e) => this.failed(job, e));
  }

  async save(job: Job): Promise<void> {
    if (this.bucket) await saveJob(this.bucket, job).catch((e) => this.failed(job, e));
  }

  private failed(job: Job, e: unknown): void {
    this.warn(`job ${job.id} could not be written to ${JOBS_BUCKET}: ${firstLine(e)}`);
  }
}

export function newJob(
  kind: Job["kind"],
  file: Record<string, unknown>,
  nodes: { node: string; serial: number | null }[],
): Job {
  return {
    id: newJobId(),
    kind,
    started_at: new Date().toISOString(),
    finished_at: null,
    file_digest: digestOf(JSON.stringify(file)),
    targets: nodes.map((n) => n.node),
    nodes: Object.fromEntries(nodes.map((n) => [n.node, pendingNode(n.serial)])),
  };
}
