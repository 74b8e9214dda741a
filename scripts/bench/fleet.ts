// `npm run bench:fleet [-- --nodes N]`: what one bus carries (`-- --upgrade`: a fleet upgraded, upgrade.ts). For a mesh of one server, then a three-server
// cluster (each server under its own `mesh up --only I`, as the units run them): N real `mesh-host run`
// processes (default 100), each with its own temporary root and state, each added with `mesh node add` and
// enrolled with its code on stdin. Measured and printed:
//   enrol      every node added and enrolled
//   node add   `mesh node add` then `mesh node rm` of one more node, at 10 nodes and at N (the records are keys
//              in the mesh-nodes bucket: no file is rewritten per node; each `mesh up` still renders its servers'
//              user list while the servers authenticate by one)
//   push       `mesh push --all` of a 10-file declaration: publish (the DECLARE message's own time) → each report
//   restart    the bus stopped right after a push and started again (for the cluster: the REPORTS stream's leader
//              killed and started again): until every node heartbeats again, the reconnects a second (the
//              jitter must spread them: no second holds more than a fifth of the fleet), reports lost (must be 0)
//   rss        the bus's resident memory (every nats-server), with the fleet connected
// Everything it starts runs under one temporary directory, in its own process group, and is stopped at the end.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectBus, jsCall, MeshDir } from "../../src/mesh/index.ts";
import { Heartbeat, parseJsonBytes, Report, SignedMessage } from "../../src/vocabulary/index.ts";
import { awaitOutput, freePortPairs, mesh } from "../../test/mesh/operator.ts";
import { type Running, runCli, startCli } from "../../test/support/cli.ts";
import { ensureSea } from "../../test/support/sea.ts";
import { vmRssKb } from "./proc.ts";
import { formatKb, formatMs, percentile } from "./stats.ts";
import { upgradeBench } from "./upgrade.ts";

const HEARTBEAT_S = 5;
const ENROL_AT_ONCE = 8;
const ADD_RM_TRIES = 3;
const EVENT_WAIT_MS = 10 * 60_000;
/** A report not in by then is counted lost (the outbox retries every link, so a late one is a slow one). */
const REPORTS_LOST_AFTER_MS = 5 * 60_000;

function flagValue(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(`bench:fleet: --${name} must be a whole number from 1\n`);
    process.exit(2);
  }
  return v;
}

const say = (line: string) => process.stdout.write(`${line}\n`);

interface Fleet {
  dir: string;
  ups: Map<number, Running>;
  runs: Running[];
  heard: Map<string, number>;
  /** From a mark on (the bus back after a restart): each node's first heartbeat. */
  firstAfter: Map<string, number>;
  reports: Map<string, { at: number; digest: string }>;
}

async function upOnly(dir: string, i: number): Promise<Running> {
  const up = startCli(["mesh", "--mesh", dir, "up", "--only", String(i)]);
  await awaitOutput(up, (o) => o.stdout.includes(`server ${i} ready`), `server ${i} ready`, EVENT_WAIT_MS);
  return up;
}

/** Every server, each under its own `mesh up --only I`; resolved once JetStream has made the streams. */
async function raise(dir: string, count: number): Promise<Map<number, Running>> {
  const ups = new Map<number, Running>();
  for (let i = 1; i <= count; i++) ups.set(i, await upOnly(dir, i));
  await Promise.all(
    [...ups.values()].map((u) =>
      awaitOutput(u, (o) => o.stdout.includes("mesh up:"), "mesh up", EVENT_WAIT_MS),
    ),
  );
  return ups;
}

async function until(check: () => boolean, what: string, ms = EVENT_WAIT_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `mesh node add` then `mesh node rm` of a node not in the fleet: the median of ADD_RM_TRIES each. */
async function addRmMs(dir: string): Promise<{ add: number; rm: number }> {
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

async function enrolAll(
  base: string,
  dir: string,
  n: number,
  atTen: (ms: { add: number; rm: number }) => void,
): Promise<Running[]> {
  const names = Array.from({ length: n }, (_, i) => `n${String(i + 1).padStart(4, "0")}`);
  const codes: string[] = [];
  for (const [i, name] of names.entries()) {
    const r = await mesh(dir, ["node", "add", name]);
    if (r.code !== 0) throw new Error(`node add ${name}: ${r.stderr}`);
    codes.push(r.stdout);
    if (i + 1 === Math.min(10, n)) atTen(await addRmMs(dir));
  }
  const runs: Running[] = [];
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const i = next++;
      const state = join(base, names[i]!, "state");
      const root = join(base, names[i]!, "root");
      mkdirSync(root, { recursive: true });
      const r = await runCli(["enrol", "--state", state, "--root", root], { input: codes[i] });
      if (r.code !== 0) throw new Error(`enrol ${names[i]}: ${r.stderr}`);
    }
  };
  await Promise.all(Array.from({ length: ENROL_AT_ONCE }, worker));
  for (const name of names)
    runs.push(
      startCli([
        "run",
        "--state",
        join(base, name, "state"),
        "--root",
        join(base, name, "root"),
        "--heartbeat-s",
        String(HEARTBEAT_S),
      ]),
    );
  return runs;
}

/** A node's signed message's body, unverified: the bench times what arrives, `mesh up` judges it. */
function bodyOf(data: Uint8Array): unknown {
  const j = parseJsonBytes(data);
  const signed = j.ok ? SignedMessage.safeParse(j.value) : null;
  const body = signed?.success ? parseJsonBytes(signed.data.body) : null;
  return body?.ok ? body.value : null;
}

/** The bench's own eyes on the bus: the time each node was last heard, and each node's last report. */
async function listen(fleet: Fleet): Promise<() => Promise<void>> {
  const bus = await connectBus(new MeshDir(fleet.dir), { reconnect: true, name: "bench:fleet" });
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

function tenFiles(base: string, tag: string): string {
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

/** `mesh push --all`; each node's latency from its DECLARE message's time to its report's arrival. */
async function pushAll(fleet: Fleet, file: string): Promise<number[]> {
  const r = await mesh(fleet.dir, ["push", "--all", file, "--json", "--wait-s", "600"]);
  if (r.code !== 0) throw new Error(`mesh push --all exited ${r.code}: ${r.stderr}`);
  const pushed = JSON.parse(r.stdout).nodes as { node: string; seq: number; digest: string }[];
  const bus = await connectBus(new MeshDir(fleet.dir));
  try {
    // each report's latency from its declaration's own time in the stream
    const latencies: number[] = [];
    for (const p of pushed) {
      const msg = await jsCall(() => bus.jsm.streams.getMessage("DECLARE", { seq: p.seq }));
      const report = fleet.reports.get(p.node);
      if (msg && report?.digest === p.digest) latencies.push(report.at - msg.time.getTime());
    }
    return latencies;
  } finally {
    await bus.close();
  }
}

function busRssKb(dir: string, count: number): number {
  let total = 0;
  for (let i = 1; i <= count; i++) {
    const pid = Number(readFileSync(join(dir, "servers", String(i), "server.pid"), "utf8"));
    total += vmRssKb(pid) ?? 0;
  }
  return total;
}

/** How long after `from` every node had heartbeated again. */
async function heartbeatsBack(fleet: Fleet, from: number, n: number): Promise<number> {
  await until(() => fleet.firstAfter.size >= n, "a heartbeat from every node");
  return Math.max(...fleet.firstAfter.values()) - from;
}

/** The nodes that dialled again after `from` (their own "link up" log line), and the most in any one second. */
function reconnects(fleet: Fleet, from: number): { count: number; peak: number } {
  const perSecond = new Map<number, number>();
  let count = 0;
  for (const run of fleet.runs) {
    const times = run
      .output()
      .stderr.split("\n")
      .filter((l) => l.includes('"msg":"link up"'))
      .map((l) => (JSON.parse(l) as { time: number }).time)
      .filter((t) => t > from);
    if (!times.length) continue;
    count++;
    const s = Math.floor((times[0]! - from) / 1000);
    perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
  }
  return { count, peak: Math.max(0, ...perSecond.values()) };
}

async function scenario(servers: number, n: number): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), `bench-fleet-${servers}-`));
  const dir = join(base, "mesh");
  const fleet: Fleet = {
    dir,
    ups: new Map(),
    runs: [],
    heard: new Map(),
    firstAfter: new Map(),
    reports: new Map(),
  };
  let stopListening = async () => {};
  let failed = true;
  try {
    const ports = await freePortPairs(servers);
    const init = await mesh(dir, ["init", ...ports.flatMap((p) => ["--server", `127.0.0.1:${p}`])]);
    if (init.code !== 0) throw new Error(`mesh init: ${init.stderr}`);
    fleet.ups = await raise(dir, servers);
    stopListening = await listen(fleet);
    const enrolStart = Date.now();
    let atTen = { add: 0, rm: 0 };
    fleet.runs = await enrolAll(base, dir, n, (ms) => (atTen = ms));
    const enrolMs = Date.now() - enrolStart;
    await until(() => fleet.heard.size >= n, "a heartbeat from every node");
    const atN = await addRmMs(dir);
    say(`\n## ${servers === 1 ? "one server" : `${servers}-server cluster`}, ${n} nodes`);
    say(
      `node add / node rm (median of ${ADD_RM_TRIES}): at ${Math.min(10, n)} nodes ${formatMs(atTen.add)} / ${formatMs(atTen.rm)}, at ${n} nodes ${formatMs(atN.add)} / ${formatMs(atN.rm)}`,
    );
    say(
      `enrol of all ${n} (node add, enrol, run until heard): ${formatMs(Date.now() - enrolStart)} (add+enrol ${formatMs(enrolMs)})`,
    );
    const latencies = await pushAll(fleet, tenFiles(base, "first"));
    say(
      `push --all, 10 files, publish → report: p50 ${formatMs(percentile(latencies, 50))}, p99 ${formatMs(percentile(latencies, 99))}, max ${formatMs(Math.max(...latencies))} (${latencies.length}/${n} reports)`,
    );
    say(`bus RSS with ${n} nodes connected: ${formatKb(busRssKb(dir, servers))}`);
    // a push, then the bus goes away before every report is in: the outbox must bring each one
    const second = await mesh(dir, ["push", "--all", tenFiles(base, "second"), "--json", "--wait-s", "0"]);
    const digests = new Map(
      (JSON.parse(second.stdout).nodes as { node: string; digest: string }[]).map((p) => [p.node, p.digest]),
    );
    const victim = servers === 1 ? 1 : await leaderOf(dir);
    await fleet.ups.get(victim)!.stop(servers === 1 ? "SIGTERM" : "SIGKILL");
    const down = Date.now();
    fleet.firstAfter = new Map();
    fleet.ups.set(victim, await upOnly(dir, victim));
    const upAgainMs = Date.now() - down;
    const backMs = await heartbeatsBack(fleet, down, n);
    const dialled = reconnects(fleet, down);
    const reported = () => [...digests].filter(([node, d]) => fleet.reports.get(node)?.digest === d).length;
    await until(() => reported() === digests.size, "every report of the push", REPORTS_LOST_AFTER_MS).catch(
      () => undefined,
    );
    say(
      `${servers === 1 ? "server restarted" : `stream leader (server ${victim}) killed and restarted`}: back in ${formatMs(upAgainMs)}; every node heard again ${formatMs(backMs)} after the stop; ${dialled.count} nodes dialled again, at most ${dialled.peak} in one second (a fifth of the fleet is ${Math.ceil(n / 5)}); reports lost: ${digests.size - reported()}`,
    );
    failed = false;
  } finally {
    await stopListening();
    await Promise.all(fleet.runs.map((r) => r.stop()));
    await Promise.all([...fleet.ups.values()].map((u) => u.stop()));
    // a failed run keeps its directory: the servers' logs say what the bus saw
    if (failed) process.stderr.write(`bench:fleet: kept ${base} for its logs\n`);
    else rmSync(base, { recursive: true, force: true });
  }
}

async function leaderOf(dir: string): Promise<number> {
  const bus = await connectBus(new MeshDir(dir));
  try {
    const name = (await jsCall(() => bus.jsm.streams.info("REPORTS"))).cluster?.leader ?? "mesh-1";
    return Number(name.replace("mesh-", ""));
  } finally {
    await bus.close();
  }
}

async function main(): Promise<void> {
  process.env.MESH_HOST_BIN ??= ensureSea();
  // `--upgrade`: the fleet upgraded from the mesh's releases instead (scripts/bench/upgrade.ts)
  if (process.argv.includes("--upgrade")) return await upgradeBench(flagValue("nodes", 20));
  const n = flagValue("nodes", 100);
  say(
    `# bench:fleet — ${new Date().toISOString().slice(0, 10)}, ${n} nodes, heartbeat every ${HEARTBEAT_S} s`,
  );
  await scenario(1, n);
  await scenario(3, n);
}

main().catch((e) => {
  process.stderr.write(`bench:fleet: ${(e as Error).message}\n`);
  process.exit(1);
});
