// What both fleets of `bench:fleet` share (real `mesh-host run` processes, fleet.ts; simulated nodes, simulated.ts):
// the servers each under its own `mesh up --only I`, the bench's own eyes on the bus (who was heard when, each
// node's last report), `mesh node add`/`rm` timed, a push to all timed from each declaration's own time in the
// stream to its report, and the bus's resident memory.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { connectBus, jsCall, MeshDir } from "../../src/mesh/index.ts";
import { Heartbeat, parseJsonBytes, Report, SignedMessage } from "../../src/vocabulary/index.ts";
import { awaitOutput, mesh } from "../../test/mesh/operator.ts";
import { type Running, startCli } from "../../test/support/cli.ts";
import { vmRssKb } from "./proc.ts";
import { formatMs, percentile } from "./stats.ts";

export const ADD_RM_TRIES = 3;
export const EVENT_WAIT_MS = 10 * 60_000;
/** How long a `push --all` is let run past its own --wait-s (its summary, the bus's slow answers) before it is cut. */
const PUSH_GRACE_S = 120;
/** How many DECLARE messages are looked up at once for their time in the stream. */
const LOOKUPS_AT_ONCE = 32;

export const say = (line: string) => process.stdout.write(`${line}\n`);

export function flagValue(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(`bench:fleet: --${name} must be a whole number from 1\n`);
    process.exit(2);
  }
  return v;
}

export interface Fleet {
  dir: string;
  ups: Map<number, Running>;
  heard: Map<string, number>;
  /** From a mark on (the bus back after a restart): each node's first heartbeat. */
  firstAfter: Map<string, number>;
  reports: Map<string, { at: number; digest: string }>;
}

export async function upOnly(dir: string, i: number): Promise<Running> {
  const up = startCli(["mesh", "--mesh", dir, "up", "--only", String(i)]);
  await awaitOutput(up, (o) => o.stdout.includes(`server ${i} ready`), `server ${i} ready`, EVENT_WAIT_MS);
  return up;
}

/** Every server, each under its own `mesh up --only I`; resolved once JetStream has made the streams. */
export async function raise(dir: string, count: number): Promise<Map<number, Running>> {
  const ups = new Map<number, Running>();
  for (let i = 1; i <= count; i++) ups.set(i, await upOnly(dir, i));
  await Promise.all(
    [...ups.values()].map((u) =>
      awaitOutput(u, (o) => o.stdout.includes("mesh up:"), "mesh up", EVENT_WAIT_MS),
    ),
  );
  return ups;
}

export async function until(check: () => boolean, what: string, ms = EVENT_WAIT_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `mesh node add` then `mesh node rm` of a node not in the fleet: the median of ADD_RM_TRIES each. */
export async function addRmMs(dir: string): Promise<{ add: number; rm: number }> {
  const add: number[] = [];
  const rm: number[] = [];
  for (let i = 0; i < ADD_RM_TRIES; i++) {
    for (const [args, into] of [
      [["node", "add", "probe"], add],
      [["node", "rm", "probe"], rm],
    ] as const) {
      const start = Date.now();
      const r = await mesh(dir, [...args]);
      if (r.code !== 0) throw new Error(`${args.join(" ")}: ${r.stderr}`);
      into.push(Date.now() - start);
    }
  }
  return { add: percentile(add, 50), rm: percentile(rm, 50) };
}

/** A node's signed message's body, unverified: the bench times what arrives, `mesh up` judges it. */
export function bodyOf(data: Uint8Array): unknown {
  const j = parseJsonBytes(data);
  const signed = j.ok ? SignedMessage.safeParse(j.value) : null;
  const body = signed?.success ? parseJsonBytes(signed.data.body) : null;
  return body?.ok ? body.value : null;
}

/**
 * Of the reports the bench's listener did not hear (node → the digest each should name), how many the REPORTS
 * stream holds: the listener hears each report's core copy, and one that crossed the killed server just as it
 * died can be stored (the node's outbox has its acknowledgement) yet never reach the listener. A report is lost
 * only when the stream does not hold it.
 */
export async function storedAnyway(dir: string, unheard: [string, string][]): Promise<number> {
  if (!unheard.length) return 0;
  const bus = await connectBus(new MeshDir(dir));
  try {
    let stored = 0;
    for (const [node, digest] of unheard) {
      const sm = await jsCall(() =>
        bus.jsm.streams.getMessage("REPORTS", { last_by_subj: `mesh.report.${node}` }),
      ).catch(() => null);
      const r = sm ? Report.safeParse(bodyOf(sm.data)) : null;
      if (r?.success && r.data.declaration.digest === digest) stored++;
    }
    return stored;
  } finally {
    await bus.close();
  }
}

/** The bench's own eyes on the bus: the time each node was last heard, and each node's last report. */
/** The mesh directory with one of its servers only: the bench's listener kept off the server a run restarts. */
class OneServer extends MeshDir {
  constructor(
    dir: string,
    private readonly index: number,
  ) {
    super(dir);
  }

  override urls(): string[] {
    return [super.urls()[this.index - 1]!];
  }
}

/** The bench's listener; `server` pins it to that server (1-based) instead of any of them. */
export async function listen(fleet: Fleet, server?: number): Promise<() => Promise<void>> {
  const dir = server ? new OneServer(fleet.dir, server) : new MeshDir(fleet.dir);
  const bus = await connectBus(dir, { reconnect: true, name: "bench:fleet" });
  bus.nc.subscribe("mesh.heartbeat.>", {
    callback: (_e, m) => {
      const h = Heartbeat.safeParse(bodyOf(m.data));
      if (!h.success) return;
      fleet.heard.set(h.data.node, Date.now());
      if (!fleet.firstAfter.has(h.data.node)) fleet.firstAfter.set(h.data.node, Date.now());
    },
  });
  bus.nc.subscribe("mesh.report.>", {
    callback: (_e, m) => {
      const r = Report.safeParse(bodyOf(m.data));
      if (r.success) fleet.reports.set(r.data.node, { at: Date.now(), digest: r.data.declaration.digest });
    },
  });
  await bus.nc.flush();
  return () => bus.close();
}

export function tenFiles(base: string, tag: string): string {
  const resources = Array.from({ length: 10 }, (_, i) => ({
    id: `f${i}`,
    type: "file",
    path: `/etc/bench/${i}.conf`,
    content: `${tag} ${i}\n`,
  }));
  const path = join(base, `${tag}.json`);
  writeFileSync(path, JSON.stringify({ v: 1, mode: "converged", resources }));
  return path;
}

/** One node's part of a push: its declaration's time in the stream, and when the bench heard its report. */
export interface PushTimes {
  node: string;
  digest: string;
  stored: number;
  heard: number;
}

/** `mesh push --all`; each node's declaration's time in the stream and its report's arrival. */
export async function pushAll(fleet: Fleet, file: string, waitS = 600): Promise<PushTimes[]> {
  // the push waits for every report itself, up to waitS: only past that is it cut
  const r = await mesh(fleet.dir, ["push", "--all", file, "--json", "--wait-s", String(waitS)], {
    timeoutMs: (waitS + PUSH_GRACE_S) * 1000,
  });
  if (r.code !== 0) throw new Error(`mesh push --all exited ${r.code}: ${r.stderr}`);
  const pushed = JSON.parse(r.stdout).nodes as { node: string; seq: number; digest: string }[];
  const bus = await connectBus(new MeshDir(fleet.dir));
  try {
    const times: PushTimes[] = [];
    let next = 0;
    const worker = async () => {
      while (next < pushed.length) {
        const p = pushed[next++]!;
        const msg = await jsCall(() => bus.jsm.streams.getMessage("DECLARE", { seq: p.seq }));
        const report = fleet.reports.get(p.node);
        if (msg && report?.digest === p.digest)
          times.push({ node: p.node, digest: p.digest, stored: msg.time.getTime(), heard: report.at });
      }
    };
    await Promise.all(Array.from({ length: LOOKUPS_AT_ONCE }, worker));
    return times;
  } finally {
    await bus.close();
  }
}

/** "p50 …, p99 …, max …" of durations. */
export function spread(ms: number[]): string {
  return `p50 ${formatMs(percentile(ms, 50))}, p99 ${formatMs(percentile(ms, 99))}, max ${formatMs(Math.max(...ms))}`;
}

export function busRssKb(dir: string, count: number): number {
  let total = 0;
  for (let i = 1; i <= count; i++) {
    const pid = Number(readFileSync(join(dir, "servers", String(i), "server.pid"), "utf8"));
    total += vmRssKb(pid) ?? 0;
  }
  return total;
}

/** How long after `from` every node had heartbeated again. */
export async function heartbeatsBack(fleet: Fleet, from: number, n: number): Promise<number> {
  await until(() => fleet.firstAfter.size >= n, "a heartbeat from every node");
  return Math.max(...fleet.firstAfter.values()) - from;
}

export async function leaderOf(dir: string): Promise<number> {
  const bus = await connectBus(new MeshDir(dir));
  try {
    const name = (await jsCall(() => bus.jsm.streams.info("REPORTS"))).cluster?.leader ?? "mesh-1";
    return Number(name.replace("mesh-", ""));
  } finally {
    await bus.close();
  }
}
