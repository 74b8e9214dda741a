// `mesh rollout TARGETS FILE` and `rollout status|resume|abort ID`: waves that stop themselves, said as they go
// (stderr), the job at the end (stdout: a table a node, or --json one document). Exit 4 when it halted.
import {
  checkRollout,
  checkUpgrade,
  connectBus,
  type Job,
  jobsBucket,
  type MeshDir,
  newJob,
  openState,
  type PushInput,
  progressOf,
  runRollout,
  type State,
  saveJob,
  startJob,
  wavesOf,
} from "../../mesh/index.ts";
import { printable } from "../../printable.ts";
import { ReleaseVersion } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { writeJson, writeOut } from "../output.ts";
import { readGivenSecrets } from "../unseal.ts";
import type { MeshArgs } from "./args.ts";
import { jobText, readJob, shownJob, warnLine } from "./jobs.ts";
import { readDeclaration, targetsGiven, wordsGiven } from "./push.ts";

const said = warnLine("mesh rollout");

export async function rolloutCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const { names, file } = wordsGiven(mesh, args, "rollout");
  const input = {
    file: readDeclaration(file),
    secrets: readGivenSecrets(args.secret),
    allowRemovals: args.allowRemovals,
  };
  const state = await openState(mesh);
  try {
    const ordered = [...(await targetsGiven(state, args, names))].sort();
    const waves = wavesOf(ordered, args.canary, args.waves);
    await checkRollout(state, ordered, input);
    return await started(mesh, state, args, waves, input);
  } finally {
    await state.bus.close();
  }
}

/**
 * `mesh upgrade TARGETS --to V`: a rollout of each node's current declaration (the last this mesh pushed it) with
 * `host.release` set to V; the gate also waits for the node to run V, confirmed.
 */
export async function upgradeCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const ways = [args.positionals.length > 0, args.all, args.where !== null].filter(Boolean).length;
  if (ways !== 1) throw new UsageError("mesh upgrade takes NAME..., --all or --where SELECTOR, one of them");
  if (!args.to)
    throw new UsageError("mesh upgrade needs --to V: the release to upgrade to (mesh release ls)");
  const release = ReleaseVersion.safeParse(args.to);
  if (!release.success)
    throw new UsageError(`--to "${printable(args.to.slice(0, 70))}" must be a version such as 0.2.0`);
  mesh.config();
  const state = await openState(mesh);
  try {
    const ordered = [...(await targetsGiven(state, args, args.positionals))].sort();
    const waves = wavesOf(ordered, args.canary, args.waves);
    await checkUpgrade(mesh, state, ordered, release.data);
    const input = { file: { host: { release: release.data } }, secrets: new Map<string, Uint8Array>() };
    return await started(mesh, state, args, waves, input, release.data);
  } finally {
    await state.bus.close();
  }
}

/** The job made and kept, then run to its end. */
async function started(
  mesh: MeshDir,
  state: State,
  args: MeshArgs,
  waves: string[][],
  input: PushInput,
  release?: string,
): Promise<number> {
  const ordered = waves.flat();
  const job: Job = {
    ...newJob(
      "rollout",
      input.file,
      ordered.map((node) => ({ node, serial: null })),
    ),
    rollout: await progressOf(state, waves, {
      gate_s: args.gateS,
      max_failed: args.maxFailed,
      on_halt: args.onHalt,
      allow_removals: input.allowRemovals ?? false,
      file: input.file,
      ...(release ? { release } : {}),
    }),
  };
  const bucket = await jobsBucket(mesh, state.bus);
  await startJob(state.bus, bucket, job);
  said(
    `job ${job.id}: ${waves.map((w) => w.length).join(" + ")} node(s) in ${waves.length} wave(s); interrupted, \`mesh-host mesh rollout resume ${job.id}\` goes on`,
  );
  return ended(await runRollout({ mesh, state, bucket, job, input, say: said }), args);
}

export async function rolloutResumeCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const job = await rolloutJob(mesh, args);
  const p = job.rollout!;
  if (p.state !== "running")
    throw new UsageError(`rollout ${job.id} is ${p.state}: there is nothing to resume`);
  const input = { file: p.file, secrets: readGivenSecrets(args.secret), allowRemovals: p.allow_removals };
  const state = await openState(mesh);
  try {
    said(`job ${job.id}: resuming at wave ${p.wave + 1} of ${p.waves.length}`);
    const bucket = await jobsBucket(mesh, state.bus);
    return ended(await runRollout({ mesh, state, bucket, job, input, say: said }), args);
  } finally {
    await state.bus.close();
  }
}

export async function rolloutStatusCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const job = await rolloutJob(mesh, args);
  if (args.json) writeJson(shownJob(job));
  else writeOut(statusText(job));
  return 0;
}

export async function rolloutAbortCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const job = await rolloutJob(mesh, args);
  if (job.rollout!.state !== "running")
    throw new UsageError(`rollout ${job.id} is ${job.rollout!.state} already`);
  const bus = await connectBus(mesh);
  try {
    await saveJob(await jobsBucket(mesh, bus), { ...job, rollout: { ...job.rollout!, state: "aborted" } });
  } finally {
    await bus.close();
  }
  writeOut(`rollout ${job.id} aborted: it stops before its next wave; what it applied stays`);
  return 0;
}

async function rolloutJob(mesh: MeshDir, args: MeshArgs): Promise<Job> {
  const [id, ...extra] = args.positionals;
  if (!id || extra.length) throw new UsageError(`mesh ${args.command} takes one ID (mesh jobs lists them)`);
  const job = await readJob(mesh, id);
  if (job.kind !== "rollout" || !job.rollout)
    throw new UsageError(`job ${id} is a ${job.kind}, not a rollout`);
  return job;
}

/** The job, its waves and where it stands. */
function statusText(job: Job): string {
  const p = job.rollout!;
  const waves = p.waves.map(
    (w, i) =>
      `  wave ${i + 1}${i < p.wave ? " (done)" : i === p.wave && p.state === "running" ? " (now)" : ""}: ${w.join(", ")}`,
  );
  const state = `${p.state}${p.halted_because ? `: ${p.halted_because}` : ""}`;
  return `${jobText(job)}rollout ${state}\n${waves.join("\n")}`;
}

function ended(job: Job, args: MeshArgs): number {
  if (args.json) writeJson(shownJob(job));
  else writeOut(statusText(job));
  const p = job.rollout!;
  if (p.state === "halted") return 4;
  const failed = Object.values(job.nodes).some((n) =>
    ["failed", "refused", "superseded", "silent"].includes(n.outcome),
  );
  return p.state === "aborted" || failed ? 1 : 0;
}
