// `npm run bench:fleet -- --simulated N`: what one bus carries when the fleet is large. One process simulates N
// nodes, in a worker thread beside the bench's own (sim-threads.ts) so its listener and timings are not queued
// behind them (sim-node.ts: their own identity keys, user JWTs from real enrolment answered by `mesh up`, the pinned TLS
// dial, heartbeats, pulling declarations, signed reports), against one server, then a three-server cluster, each
// server under its own `mesh up --only I`. Measured and printed:
//   node add   `mesh node add` then `mesh node rm` of one more node at N nodes against a mesh of 10 beside it, in
//              turns, and their ratio (add-cost.ts); the fleet itself is added by the function the command runs
//   enrol      every node enrolled (asked, answered by a controller, membership opened) and heard
//   push       `mesh push --all` of a 10-file declaration: each declaration's own time in the stream → its report
//   rss        the bus (every nats-server) with the fleet connected, less the bus before it, a node; each `mesh up`
//   restart    the bus stopped (for the cluster: the REPORTS stream's leader killed) right after a push and started
//              again: until every node is heard again, the dials a second (no second above a fifth of the fleet),
//              reports lost (0)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { addNode, MeshDir } from "../../src/mesh/index.ts";
import { freePortPairs, mesh } from "../../test/mesh/operator.ts";
import { addCostAgainstTen } from "./add-cost.ts";
import {
  busRssKb,
  type Fleet,
  heartbeatsBack,
  leaderOf,
  listen,
  type PushTimes,
  pushAll,
  raise,
  say,
  spread,
  storedAnyway,
  tenFiles,
  until,
  upOnly,
} from "./fleet-mesh.ts";
import { vmRssKb } from "./proc.ts";
import { DIALS_AT_ONCE } from "./sim-node.ts";
import { type NodeState, SimThreads } from "./sim-threads.ts";
import { formatKb, formatMs } from "./stats.ts";

/** The default of a real node (HEARTBEAT_S): the controller's load is a real fleet's. */
const HEARTBEAT_S = 30;
const ADD_AT_ONCE = 8;
const ENROL_AT_ONCE = 32;
const PROGRESS_MS = 60_000;
/** A report not in by then is counted lost (the outbox retries on every link, so a late one is a slow one). */
const REPORTS_LOST_AFTER_MS = 5 * 60_000;
/** How long the bench's own listener dials a restarted server among the fleet's redials, and its pause between. */
const RELISTEN_FOR_MS = 15 * 60_000;
const RELISTEN_PAUSE_MS = 2_000;
/** How long the simulated nodes are given to stop at the end before the servers are stopped under them. */
const NODES_STOP_MS = 60_000;
/**
 * A push that waits for no report still raises each target's serial and records its stream sequence, a write of
 * the serialised nodes bucket each, one at a time: minutes at 10,000 (the helper's 3-minute cut ended one).
 */
const PUSH_COMMAND_MS = 15 * 60_000;

interface SimFleet extends Fleet {
  sims: SimThreads;
  /** The bench's listener closed and opened again. */
  relisten(): Promise<void>;
}

const names = (n: number) => Array.from({ length: n }, (_, i) => `s${String(i + 1).padStart(5, "0")}`);

/** Run `work` over `items`, `atOnce` at a time; once one fails, no worker takes another. */
async function eachAtOnce<T>(items: T[], atOnce: number, work: (item: T, i: number) => Promise<void>) {
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (next < items.length && !failed) {
      const i = next++;
      await work(items[i]!, i).catch((e) => {
        failed = true;
        throw e;
      });
    }
  };
  await Promise.all(Array.from({ length: atOnce }, worker));
}

/** Every node added, by the function `mesh node add` runs (a process each would time process starts). */
async function addAll(dir: string, n: number): Promise<string[]> {
  const meshDir = new MeshDir(dir);
  const codes: string[] = new Array(n);
  await eachAtOnce(names(n), ADD_AT_ONCE, async (name, i) => {
    codes[i] = await addNode(meshDir, name);
  });
  return codes;
}

/** The enrolments in flight, by what each waits on: a stall says where it is. */
function inFlight(fleet: SimFleet): string {
  const by = new Map<string, number>();
  for (const phase of fleet.sims.enrolling.values()) by.set(phase, (by.get(phase) ?? 0) + 1);
  return [...by].map(([phase, count]) => `${count} ${phase}`).join(", ") || "none";
}

async function enrolAll(fleet: SimFleet, codes: string[]): Promise<void> {
  const all = names(codes.length);
  await eachAtOnce(codes, ENROL_AT_ONCE, (code, i) => fleet.sims.enrol(all[i]!, code));
}

/** The nodes without a link, by why their last dial or bind failed. */
async function failures(fleet: SimFleet): Promise<string> {
  const by = new Map<string, number>();
  for (const x of await fleet.sims.states()) if (x.failure) by.set(x.failure, (by.get(x.failure) ?? 0) + 1);
  return [...by].map(([why, count]) => `${count}× ${why}`).join("; ") || "no dial failing";
}

/** The dials after `from`, and the most in any one second. */
function dialsAfter(fleet: SimFleet, from: number): { count: number; peak: number } {
  const perSecond = new Map<number, number>();
  const after = fleet.sims.linkUps.filter((t) => t > from);
  for (const t of after) {
    const s = Math.floor((t - from) / 1000);
    perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
  }
  return { count: after.length, peak: Math.max(0, ...perSecond.values()) };
}

const controllerRssKb = (fleet: SimFleet) =>
  [...fleet.ups.values()].reduce((kb, u) => kb + (vmRssKb(u.child.pid ?? 0) ?? 0), 0);

async function measure(fleet: SimFleet, base: string, servers: number, n: number): Promise<void> {
  const busEmpty = busRssKb(fleet.dir, servers);
  const enrolStart = Date.now();
  const codes = await addAll(fleet.dir, n);
  const addedMs = Date.now() - enrolStart;
  const enrolFrom = Date.now();
  // a long wait says how it goes, on stderr: how many are enrolled and heard, what the enrolments in flight wait
  // on, and why the nodes not heard are not
  const progress = setInterval(async () => {
    const failing = await failures(fleet);
    process.stderr.write(
      `bench:fleet: ${fleet.sims.enrolled.size}/${n} enrolled (in flight: ${inFlight(fleet)}); ${fleet.heard.size}/${n} heard; ${failing}\n`,
    );
  }, PROGRESS_MS);
  await enrolAll(fleet, codes).catch((e: Error) => {
    clearInterval(progress);
    throw e;
  });
  const enrolMs = Date.now() - enrolFrom;
  await until(() => fleet.heard.size >= n, "a heartbeat from every node")
    .catch(async (e: Error) => {
      throw new Error(`${e.message}: ${fleet.heard.size} heard; ${await failures(fleet)}`);
    })
    .finally(() => clearInterval(progress));
  const heardMs = Date.now() - enrolFrom;
  say(`\n## ${servers === 1 ? "one server" : `${servers}-server cluster`}, ${n} simulated nodes`);
  await addCostAgainstTen(fleet.dir, join(base, "companion"), servers, n);
  say(
    `all ${n} added in ${formatMs(addedMs)}; enrolled in ${formatMs(enrolMs)} (${Math.round((n * 1000) / enrolMs)} a second; ${fleet.sims.reissued} cut by the bus before their answer, asked again with a reissued code; ${fleet.sims.askedAgain} asked again after a dial or answer failed), every one heard ${formatMs(heardMs)} after the first question`,
  );
  const held = monitorEventLoopDelay({ resolution: 10 });
  held.enable();
  const times = await pushAll(fleet, tenFiles(base, "first"));
  held.disable();
  say(
    `push --all, 10 files, publish → report: ${spread(times.map((t) => t.heard - t.stored))} (${times.length}/${n} reports)`,
  );
  say(
    `${stagesOf(await fleet.sims.states(), times)}; the bench's own thread's event loop held up p99 ${formatMs(held.percentile(99) / 1e6)}, max ${formatMs(held.max / 1e6)}`,
  );
  const bus = busRssKb(fleet.dir, servers);
  say(
    `bus RSS ${formatKb(bus)} with ${n} nodes (${formatKb(busEmpty)} before them): ${formatKb((bus - busEmpty) / n)} a node; controller${servers > 1 ? "s" : ""} (mesh up) ${formatKb(controllerRssKb(fleet))}; the simulator ${formatKb(vmRssKb(process.pid))}`,
  );
  await restart(fleet, base, servers, n);
}

/**
 * A push, then the server every node is linked to (each dials its membership's servers in order: the first) gone
 * before every report is in, and started again: the outbox must bring each report. One server: SIGTERM, as a
 * service manager stops it; the cluster: SIGKILL, a machine lost, the nodes dialling on to the next server.
 */
async function restart(fleet: SimFleet, base: string, servers: number, n: number): Promise<void> {
  const pushing = Date.now();
  const second = await mesh(
    fleet.dir,
    ["push", "--all", tenFiles(base, "second"), "--json", "--wait-s", "0"],
    { timeoutMs: PUSH_COMMAND_MS },
  );
  if (second.code !== 0) throw new Error(`mesh push --all exited ${second.code}: ${second.stderr}`);
  say(`push --all --wait-s 0 to ${n}: the command took ${formatMs(Date.now() - pushing)}`);
  const digests = new Map(
    (JSON.parse(second.stdout).nodes as { node: string; digest: string }[]).map((p) => [p.node, p.digest]),
  );
  const leader = servers === 1 ? 1 : await leaderOf(fleet.dir);
  // a node linked to another server (its dial once fell through to the next) is not cut, and never links again
  const cut = await linkedTo(fleet, new MeshDir(fleet.dir).urls()[0]!);
  await fleet.ups.get(1)!.stop(servers === 1 ? "SIGTERM" : "SIGKILL");
  const down = Date.now();
  fleet.firstAfter = new Map();
  fleet.ups.set(1, await upOnly(fleet.dir, 1));
  const upAgainMs = Date.now() - down;
  // one server: the bench's own connection lost it too, and is heard from the moment it listens again
  if (servers === 1) await fleet.relisten();
  const progress = setInterval(async () => {
    const failing = await failures(fleet);
    process.stderr.write(
      `bench:fleet: ${linkedSince(fleet, cut, down).length}/${cut.size} cut linked again; ${failing}\n`,
    );
  }, PROGRESS_MS);
  const linked = await linkedAgain(fleet, cut, down).finally(() => clearInterval(progress));
  const backMs = await heartbeatsBack(fleet, down, n);
  const dialled = dialsAfter(fleet, down);
  const reported = () => [...digests].filter(([node, d]) => fleet.reports.get(node)?.digest === d).length;
  await until(() => reported() === digests.size, "every report of the push", REPORTS_LOST_AFTER_MS).catch(
    () => undefined,
  );
  const unheard = [...digests].filter(([node, d]) => fleet.reports.get(node)?.digest !== d);
  const stored = await storedAnyway(fleet.dir, unheard);
  if (unheard.length > stored) say(await unreported(fleet, unheard, cut));
  const fifth = Math.ceil(n / 5);
  const what =
    servers === 1 ? "server restarted" : `server 1 killed and restarted (the REPORTS leader was ${leader})`;
  say(
    `${what}: back in ${formatMs(upAgainMs)}; ${cut.size} nodes were linked to it (${n - cut.size} to the others, never cut); every one linked again (dialled, signed in, bound; the simulator dials ${DIALS_AT_ONCE} at a time) ${formatMs(linked)} and heard ${formatMs(backMs)} after the stop; ${dialled.count} dials, at most ${dialled.peak} in one second (a fifth of the fleet is ${fifth}${dialled.peak > fifth ? ": ABOVE IT" : ""}); reports lost: ${unheard.length - stored}${stored ? ` (${stored} more stored in REPORTS whose core copy the bench never heard)` : ""}`,
  );
}

/**
 * Where the reports not heard stopped, node by node: never taken (its wake-up and every look since missed it),
 * taken and waiting in the outbox (no link took it yet), or acknowledged by the server and still not heard.
 */
async function unreported(fleet: SimFleet, unheard: [string, string][], cut: Set<string>): Promise<string> {
  const byName = new Map((await fleet.sims.states()).map((x) => [x.name, x]));
  const count = (keep: (x: NodeState, digest: string) => boolean) =>
    unheard.filter(([name, d]) => {
      const x = byName.get(name);
      return x !== undefined && keep(x, d);
    }).length;
  const servers = new Map<string, number>();
  for (const [name] of unheard) {
    const on = byName.get(name)?.server ?? "no link";
    servers.set(on, (servers.get(on) ?? 0) + 1);
  }
  const failures = new Set(unheard.map(([name]) => byName.get(name)?.failure).filter(Boolean));
  return `the ${unheard.length} not heard: ${unheard.filter(([name]) => cut.has(name)).length} were cut; ${count((x, d) => x.took?.digest !== d)} never took the push (serials ${[...new Set(unheard.map(([name]) => byName.get(name)?.serial))].join(", ")}); ${count((x, d) => x.took?.digest === d && x.acked?.digest !== d)} took it with the report unacknowledged (${count((x) => x.waiting > 0)} with one waiting in the outbox); ${count((x, d) => x.acked?.digest === d)} had it acknowledged; linked now to ${[...servers].map(([on, k]) => `${on} (${k})`).join(", ")}${failures.size ? `; failing: ${[...failures].join("; ")}` : ""}`;
}

/**
 * Where a push's time went, node by node: stored → taken (the node's read: its wake-up, the direct get, any look
 * again), taken → acknowledged (the report signed and stored), acknowledged → heard (the bench's listener).
 */
function stagesOf(nodes: NodeState[], times: PushTimes[]): string {
  const byName = new Map(nodes.map((x) => [x.name, x]));
  const read: number[] = [];
  const report: number[] = [];
  const heard: number[] = [];
  for (const t of times) {
    const x = byName.get(t.node);
    if (x?.took?.digest !== t.digest || x.acked?.digest !== t.digest) continue;
    read.push(x.took.at - t.stored);
    report.push(x.acked.at - x.took.at);
    heard.push(t.heard - x.acked.at);
  }
  return `stored → taken ${spread(read)}; taken → report acknowledged ${spread(report)}; acknowledged → heard ${spread(heard)}`;
}

/** The nodes whose link is on `server` now (compared by port: the one machine's servers differ in nothing else). */
async function linkedTo(fleet: SimFleet, server: string): Promise<Set<string>> {
  const port = new URL(server).port;
  const on = (await fleet.sims.states()).filter((x) => x.server && new URL(x.server).port === port);
  return new Set(on.map((x) => x.name));
}

/** When each of `nodes` linked, of those whose link last came up after `from`. */
const linkedSince = (fleet: SimFleet, nodes: Set<string>, from: number) =>
  [...nodes].map((name) => fleet.sims.linkedAt.get(name) ?? 0).filter((t) => t > from);

/** How long after `from` every one of `nodes` had its link up again. */
async function linkedAgain(fleet: SimFleet, nodes: Set<string>, from: number): Promise<number> {
  await until(() => linkedSince(fleet, nodes, from).length >= nodes.size, "every node cut linked again");
  return Math.max(...linkedSince(fleet, nodes, from)) - from;
}

export async function simulatedScenario(servers: number, n: number): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), `bench-sim-${servers}-`));
  const dir = join(base, "mesh");
  const fleet: SimFleet = {
    dir,
    ups: new Map(),
    heard: new Map(),
    firstAfter: new Map(),
    reports: new Map(),
    sims: new SimThreads(dir, HEARTBEAT_S),
    relisten: async () => {
      await stopListening();
      // the bench's own dial competes with the whole fleet's redials: tried again until it gets in, as a node is
      const deadline = Date.now() + RELISTEN_FOR_MS;
      for (;;) {
        try {
          stopListening = await listen(fleet, servers);
          return;
        } catch (e) {
          if (Date.now() > deadline) throw e;
          process.stderr.write(
            `bench:fleet: the bench's own listener not in yet (${(e as Error).message})\n`,
          );
          await new Promise((r) => setTimeout(r, RELISTEN_PAUSE_MS));
        }
      }
    },
  };
  let stopListening = async () => {};
  let failed = true;
  try {
    const ports = await freePortPairs(servers);
    const init = await mesh(dir, ["init", ...ports.flatMap((p) => ["--server", `127.0.0.1:${p}`])]);
    if (init.code !== 0) throw new Error(`mesh init: ${init.stderr}`);
    fleet.ups = await raise(dir, servers);
    // on the last server: the one restarted is the first, where every node is linked
    stopListening = await listen(fleet, servers);
    await measure(fleet, base, servers, n).catch((e: Error) => {
      // said at once: stopping thousands of nodes takes a while
      process.stderr.write(`bench:fleet: ${e.message}\n`);
      throw e;
    });
    failed = false;
  } finally {
    const stopped = fleet.sims.stop();
    const late = new Promise((r) => setTimeout(r, NODES_STOP_MS).unref());
    if ((await Promise.race([stopped.then(() => true), late])) !== true) {
      process.stderr.write(
        `bench:fleet: the nodes not all stopped in ${NODES_STOP_MS / 1000} s; their threads ended\n`,
      );
      await fleet.sims.terminate();
    }
    await stopListening();
    await Promise.all([...fleet.ups.values()].map((u) => u.stop()));
    // a failed run keeps its directory: the servers' logs say what the bus saw
    if (failed) process.stderr.write(`bench:fleet: kept ${base} for its logs\n`);
    else rmSync(base, { recursive: true, force: true });
  }
}
