// `mesh rollout`: a declaration to many nodes in waves that stop themselves. The canary first, then each wave; a
// wave starts only when every node of the waves before it has reported `applied` and then sent a heartbeat
// showing it healthy (its last apply is this declaration's, applied, its binary confirmed) within the gate. The
// first node that fails, refuses or stays silent past the gate once --max-failed is spent halts it: `revert`
// pushes each node the rollout changed its previous declaration again (a new serial), `stop` leaves them. The
// job record holds the progress after every step, so a rollout interrupted resumes where it stood and never
// pushes a node twice; `abort` (from anywhere) stops it before its next wave.
import { ROLLOUT_POLL_MS } from "../defaults.ts";
import { flushed } from "../flushed.ts";
import type { Heartbeat } from "../vocabulary/index.ts";
import { heardFrom, identityOf } from "./heard.ts";
import { type Job, type JobNode, pendingNode, type RolloutProgress, saveJob } from "./jobs.ts";
import type { Bucket } from "./kv.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import {
  type Composed,
  compose,
  type Pushed,
  type PushInput,
  preparePush,
  publishAndWait,
  replacedLine,
  unrecordedLine,
} from "./push.ts";
import { listReleases } from "./release.ts";
import { droppedBy, refuseRemovals } from "./removals.ts";
import { knownNode, type State } from "./state.ts";

/** `--waves 1,25%,100%`: each a cumulative count of nodes or a percentage of them; the last must reach all. */
export function wavesOf(targets: string[], canary: number, spec: string): string[][] {
  const total = targets.length;
  if (canary > total) throw new MeshRefused(`--canary ${canary}: there are only ${total} target node(s)`);
  const ends = spec.split(",").map((w) => {
    const m = /^\s*(\d{1,6})(%?)\s*$/.exec(w);
    if (!m || Number(m[1]) < 1 || (m[2] && Number(m[1]) > 100))
      throw new MeshRefused(
        `--waves "${spec.slice(0, 60)}": "${w.trim().slice(0, 20)}" is neither a count nor a percentage (1 to 100%)`,
      );
    return m[2] ? Math.ceil((Number(m[1]) * total) / 100) : Math.min(Number(m[1]), total);
  });
  if (ends.at(-1) !== total)
    throw new MeshRefused(`--waves "${spec.slice(0, 60)}": the last wave must reach every node (100%)`);
  const waves: string[][] = canary ? [targets.slice(0, canary)] : [];
  let done = canary;
  for (const end of ends) {
    if (end <= done) continue;
    waves.push(targets.slice(done, end));
    done = end;
  }
  return waves;
}

/** What the runner tells the operator as it goes (one line each). */
export type Said = (line: string) => void;

export interface RolloutRun {
  mesh: MeshDir;
  state: State;
  bucket: Bucket<Job>;
  job: Job;
  input: PushInput;
  say: Said;
}

const failedOutcome = (o: JobNode["outcome"]) => ["failed", "refused", "superseded", "silent"].includes(o);

/** What the gate reads, as it arrives, signed by each target's identity key: the newest heartbeat per node, and
 * the nodes whose report said their launcher rolled back a release (a binary that could not start). */
interface Heard {
  latest: Map<string, Heartbeat>;
  rolledBack: Set<string>;
  stop(): void;
}

/** The launcher's note, carried by the first report after a rollback (store/move.ts: pendingNotes). */
const ROLLBACK_NOTE = /^rolled back from /;

async function heard(r: RolloutRun): Promise<Heard> {
  const identities = new Map<string, string | null>();
  for (const n of r.job.targets) identities.set(n, identityOf((await knownNode(r.state, n)).value));
  const latest = new Map<string, Heartbeat>();
  const rolledBack = new Set<string>();
  // a target's own subject, or nothing of this rollout's
  const target = (subject: string, prefix: string) => {
    const node = subject.slice(prefix.length);
    return identities.has(node) ? node : null;
  };
  const beats = r.state.bus.nc.subscribe("mesh.heartbeat.>", {
    callback: (err, m) => {
      const node = err ? null : target(m.subject, "mesh.heartbeat.");
      const hb = node ? heardFrom(node, identities.get(node)!, m.data, "heartbeat") : null;
      if (node && hb?.ok) latest.set(node, hb.value);
    },
  });
  const reports = r.state.bus.nc.subscribe("mesh.report.>", {
    callback: (err, m) => {
      const node = err ? null : target(m.subject, "mesh.report.");
      const report = node ? heardFrom(node, identities.get(node)!, m.data, "report") : null;
      if (node && report?.ok && report.value.notes?.some((l) => ROLLBACK_NOTE.test(l))) rolledBack.add(node);
    },
  });
  await flushed(r.state.bus.nc, "the connection to the bus closed before it took the reports' subscription");
  return {
    latest,
    rolledBack,
    stop: () => {
      beats.unsubscribe();
      reports.unsubscribe();
    },
  };
}

/**
 * Healthy: the node's heartbeat says its last apply is this declaration, applied, and its binary confirmed; for
 * an upgrade, also that it runs the release named (the build before the swap heartbeats its own version; a node
 * never fetches a release of the version it runs).
 */
const healthy = (hb: Heartbeat | undefined, seq: number, release: string | undefined) =>
  hb?.last?.seq === seq &&
  hb.last.outcome === "applied" &&
  hb.confirmed &&
  (release === undefined || hb.version === release);

/** Run the rollout from where its job stands to done, halted or aborted; the job as it ended. */
export async function runRollout(r: RolloutRun): Promise<Job> {
  const p = r.job.rollout!;
  const beats = await heard(r);
  try {
    while (p.state === "running" && p.wave < p.waves.length) {
      await save(r);
      if (p.state !== "running") break;
      await runWave(r, p.waves[p.wave]!, beats);
      // aborted while the wave ran: it stops here, neither halting nor putting anything back
      if (p.state !== "running") break;
      const failed = Object.values(r.job.nodes).filter((n) => failedOutcome(n.outcome)).length;
      if (failed > p.max_failed) {
        p.state = "halted";
        p.halted_because = haltReason(r.job, p.max_failed);
        r.say(`halted: ${p.halted_because}`);
        await save(r);
        if (p.on_halt === "revert") await revert(r);
        else if (p.release)
          for (const n of r.job.targets.filter((t) => unheard(r.job.nodes[t]!))) await withdraw(r, n);
        break;
      }
      p.wave++;
      if (p.wave === p.waves.length) p.state = "done";
      await save(r);
    }
  } finally {
    beats.stop();
  }
  for (const n of r.job.targets)
    if (r.job.nodes[n]!.outcome === "pending") r.job.nodes[n]!.outcome = "untouched";
  r.job.finished_at = p.state === "running" ? null : new Date().toISOString();
  await save(r);
  return r.job;
}

function haltReason(job: Job, maxFailed: number): string {
  const bad = job.targets.filter((n) => failedOutcome(job.nodes[n]!.outcome));
  const named = bad.map((n) => `${n} ${job.nodes[n]!.outcome}`).join(", ");
  return `${bad.length} node(s) did not come through (${named}), more than --max-failed ${maxFailed}`;
}

/** The job written as it stands; an abort written meanwhile (`rollout abort`, from anywhere) is kept, and taken. */
async function save(r: RolloutRun): Promise<void> {
  const stored = await r.bucket.get(r.job.id);
  const p = r.job.rollout!;
  if (stored?.value.rollout?.state === "aborted" && p.state === "running") {
    p.state = "aborted";
    r.say("aborted: no further wave starts; what was applied stays");
  }
  await saveJob(r.bucket, r.job);
}

/** The sequence a node's push of `serial` was published with (its record keeps it). */
async function seqOf(r: RolloutRun, node: string, serial: number | null): Promise<number> {
  const record = (await knownNode(r.state, node)).value;
  return record.pushes.find((x) => x.serial === serial)?.seq ?? -1;
}

/** One wave: push to the nodes not yet pushed, then wait (within the gate) for each report and healthy heartbeat. */
async function runWave(r: RolloutRun, wave: string[], beats: Heard): Promise<void> {
  const p = r.job.rollout!;
  const deadline = Date.now() + p.gate_s * 1000;
  // not yet pushed, or given a serial by a run that was stopped before it published (the record has no sequence)
  const fresh: string[] = [];
  for (const n of wave) {
    const o = r.job.nodes[n]!;
    if (o.serial === null || (o.outcome === "pending" && (await seqOf(r, n, o.serial)) < 0)) fresh.push(n);
  }
  r.say(`wave ${p.wave + 1} of ${p.waves.length}: ${wave.join(", ")}`);
  const seqs = new Map<string, number>();
  if (fresh.length) {
    const composed = await composeWave(r, fresh);
    for (const c of composed) r.job.nodes[c.node] = pendingNode(c.serial);
    // kept before anything is sent: a rollout killed now resumes without pushing these again
    await save(r);
    const pushed = await publishAndWait(r.mesh, r.state, composed, p.gate_s * 1000);
    const unrecorded = unrecordedLine(pushed);
    if (unrecorded) r.say(unrecorded);
    for (const x of pushed) noteReport(r.job, x, p.gate_s, seqs);
  }
  await save(r);
  await gate(r, wave, beats, deadline, seqs);
  await save(r);
}

/** What the wave's nodes are pushed: FILE for each, or (an upgrade) each its own declaration naming the release. */
async function composeWave(r: RolloutRun, nodes: string[]): Promise<Composed[]> {
  const p = r.job.rollout!;
  if (!p.release) return await preparePush(r.state, nodes, r.input);
  const composed: Composed[] = [];
  for (const n of nodes)
    composed.push(
      ...(await preparePush(r.state, [n], { ...r.input, file: upgraded(p.previous[n], p.release) })),
    );
  return composed;
}

/** A node's declaration as the mesh last pushed it, its `host.release` now `release`. */
export function upgraded(
  previous: Record<string, unknown> | null | undefined,
  release: string,
): Record<string, unknown> {
  if (!previous) throw new MeshRefused("an upgrade needs each node's current declaration, and one has none");
  const host = (previous.host as Record<string, unknown> | undefined) ?? {};
  return { ...previous, host: { ...host, release } };
}

function noteReport(job: Job, x: Pushed, gateS: number, seqs: Map<string, number>): void {
  seqs.set(x.node, x.seq);
  job.nodes[x.node] = x.report
    ? {
        outcome: x.report.outcome === "applied" ? "pending" : x.report.outcome,
        serial: x.serial,
        at: x.report.finished_at,
        steps: x.report.steps,
        refusals: x.report.refusals,
        ...(x.report.outcome === "applied" ? { detail: "applied; waiting for a healthy heartbeat" } : {}),
      }
    : x.replacedBy
      ? { ...pendingNode(x.serial), outcome: "superseded", detail: replacedLine(x.replacedBy) }
      : { ...pendingNode(x.serial), outcome: "silent", detail: `no report within the gate (${gateS} s)` };
}

/** Each node of the wave that applied: healthy by a heartbeat before the deadline, else silent. */
async function gate(
  r: RolloutRun,
  wave: string[],
  beats: Heard,
  deadline: number,
  seqs: Map<string, number>,
): Promise<void> {
  const waiting = () =>
    wave.filter((n) => r.job.nodes[n]!.outcome === "pending" && r.job.nodes[n]!.serial !== null);
  for (;;) {
    for (const n of waiting()) {
      // a resumed rollout finds the sequence its push was given in the node's record
      const seq = seqs.get(n) ?? (await seqOf(r, n, r.job.nodes[n]!.serial));
      if (r.job.rollout!.release && beats.rolledBack.has(n))
        r.job.nodes[n] = {
          ...r.job.nodes[n]!,
          outcome: "failed",
          detail: `its launcher rolled back from release ${r.job.rollout!.release}: it could not start (its report says so)`,
        };
      else if (healthy(beats.latest.get(n), seq, r.job.rollout!.release))
        r.job.nodes[n] = {
          ...r.job.nodes[n]!,
          outcome: "applied",
          detail: "applied, and healthy by its heartbeat",
        };
    }
    if (!waiting().length || Date.now() > deadline) break;
    await new Promise((res) => setTimeout(res, ROLLOUT_POLL_MS));
  }
  for (const n of waiting())
    r.job.nodes[n] = {
      ...r.job.nodes[n]!,
      outcome: "silent",
      detail: `no healthy heartbeat within the gate (${r.job.rollout!.gate_s} s)`,
    };
}

/** Pushed, and never heard from: a node away (offline) before its push reached it. */
const unheard = (o: JobNode) => o.serial !== null && o.outcome === "silent" && o.at === null;

/**
 * A halted upgrade takes back what it pushed a node that never heard it: its previous declaration is sent again under
 * a new serial (the stream keeps one per node), so a node that comes back finds that, never the release of a rollout
 * that did not complete. Nothing is waited for: the node is away.
 */
async function withdraw(r: RolloutRun, n: string): Promise<void> {
  const previous = r.job.rollout!.previous[n];
  // an upgrade's targets all had one (checkUpgrade)
  if (!previous) return;
  const composed = await preparePush(r.state, [n], {
    file: previous,
    secrets: new Map(),
    allowRemovals: true,
  });
  const [x] = await publishAndWait(r.mesh, r.state, composed, 0);
  const node = r.job.nodes[n]!;
  node.detail = `${node.detail}; the push withdrawn: its previous declaration sent again as serial ${x?.serial}, for when it comes back`;
  r.say(`${n}: ${node.detail}`);
  await save(r);
}

/** Each node the rollout changed gets its previous declaration again, under a new serial (unheard: withdrawn). */
async function revert(r: RolloutRun): Promise<void> {
  const p = r.job.rollout!;
  const changed = r.job.targets.filter(
    (n) => r.job.nodes[n]!.serial !== null && r.job.nodes[n]!.outcome !== "refused",
  );
  for (const n of changed) {
    if (p.release && unheard(r.job.nodes[n]!)) {
      await withdraw(r, n);
      continue;
    }
    const previous = p.previous[n];
    if (!previous) {
      r.job.nodes[n]!.detail = "not reverted: it had no declaration from this mesh before";
      continue;
    }
    const composed = await preparePush(r.state, [n], {
      file: previous,
      secrets: new Map(),
      allowRemovals: true,
    });
    {
      const [x] = await publishAndWait(r.mesh, r.state, composed, p.gate_s * 1000);
      const was = r.job.nodes[n]!.outcome;
      r.job.nodes[n] = {
        ...r.job.nodes[n]!,
        outcome: x?.report?.outcome === "applied" ? "reverted" : was,
        detail: x?.report
          ? `${was}, then its previous declaration put back as serial ${x.serial}: ${x.report.outcome}`
          : `${was}; its previous declaration sent as serial ${x?.serial}, no report within ${p.gate_s} s`,
      };
    }
    r.say(`${n}: ${r.job.nodes[n]!.detail}`);
    await save(r);
  }
}

/** A new rollout's job progress: the waves, the gate and what each node had before (what a revert puts back). */
export async function progressOf(
  state: State,
  waves: string[][],
  o: Pick<RolloutProgress, "gate_s" | "max_failed" | "on_halt" | "allow_removals" | "file" | "release">,
): Promise<RolloutProgress> {
  const previous: RolloutProgress["previous"] = {};
  for (const n of waves.flat()) previous[n] = (await knownNode(state, n)).value.last_body;
  return { ...o, waves, wave: 0, state: "running", halted_because: null, previous };
}

/** Every target composed and checked before anything is sent: a refusal, or a removal not allowed, stops it all. */
export async function checkRollout(state: State, targets: string[], input: PushInput): Promise<void> {
  const dropped: { node: string; gone: ReturnType<typeof droppedBy> }[] = [];
  for (const n of targets) {
    const record = (await knownNode(state, n)).value;
    dropped.push({ node: n, gone: droppedBy(record, compose(record, input).kept) });
  }
  if (!input.allowRemovals) refuseRemovals(dropped);
}

/**
 * `mesh upgrade --to V`: refused before anything is sent when a target has had no declaration from this mesh (there
 * is nothing to name the release in) or V is not stored for its host kind and processor (what it says of itself).
 */
export async function checkUpgrade(
  mesh: MeshDir,
  state: State,
  targets: string[],
  release: string,
): Promise<void> {
  const stored = new Set((await listReleases(mesh)).map((row) => row.name));
  for (const n of targets) {
    const record = (await knownNode(state, n)).value;
    if (!record.last_body)
      throw new MeshRefused(
        `node ${n} has had no declaration from this mesh: push it one before upgrading it`,
      );
    const kind = record.facts?.kind ?? "linux";
    const arch = record.facts?.arch ?? "unknown";
    if (!stored.has(`${release}/${kind}/${arch}`))
      throw new MeshRefused(
        `release ${release} is not stored for node ${n} (${kind}/${arch}): mesh release add it first (mesh release ls lists them)`,
      );
    compose(record, { file: upgraded(record.last_body, release), secrets: new Map() });
  }
}
