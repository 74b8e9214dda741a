// `npm run bench:fleet [-- --nodes N]`: what one bus carries (`-- --upgrade`: a fleet upgraded, upgrade.ts;
// `-- --simulated N`: N nodes simulated in one process, simulated.ts; `-- --push-cost N`: a push's bookkeeping at N
// against the bus's price of a write, push-cost.ts; `-- --baseline REF`: a healthy node's push
// against an older build, baseline.ts). For a mesh of one server, then a three-server
// cluster (each server under its own `mesh up --only I`, as the units run them): N real `mesh-host run`
// processes (default 100), each with its own temporary root and state, each added with `mesh node add` and
// enrolled with its code on stdin. Measured and printed:
//   enrol      every node added and enrolled
//   node add   `mesh node add` then `mesh node rm` of one more node, at 10 nodes and at N (the records are keys
//              in the mesh-nodes bucket, the users JWTs: no file is rewritten per node, no server reloaded)
//   push       `mesh push --all` of a 10-file declaration: publish (the DECLARE message's own time) → each report
//   restart    the bus stopped right after a push and started again (for the cluster: the REPORTS stream's leader
//              killed and started again): until every node heartbeats again, the reconnects a second (the
//              jitter must spread them: no second holds more than a fifth of the fleet), reports lost (must be 0)
//   rss        the bus's resident memory (every nats-server), with the fleet connected
// Everything it starts runs under one temporary directory, in its own process group, and is stopped at the end.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePortPairs, mesh } from "../../test/mesh/operator.ts";
import { type Running, runCli, startCli } from "../../test/support/cli.ts";
import { ensureSea } from "../../test/support/sea.ts";
import { baselineBench } from "./baseline.ts";
import {
  ADD_RM_TRIES,
  addRmMs,
  busRssKb,
  type Fleet,
  flagValue,
  heartbeatsBack,
  leaderOf,
  listen,
  pushAll,
  raise,
  say,
  spread,
  storedAnyway,
  tenFiles,
  until,
  upOnly,
} from "./fleet-mesh.ts";
import { pushCostBench } from "./push-cost.ts";
import { SIM_THREADS } from "./sim-threads.ts";
import { simulatedScenario } from "./simulated.ts";
import { formatKb, formatMs } from "./stats.ts";
import { upgradeBench } from "./upgrade.ts";

const HEARTBEAT_S = 5;
const ENROL_AT_ONCE = 8;
/** A report not in by then is counted lost (the outbox retries every link, so a late one is a slow one). */
const REPORTS_LOST_AFTER_MS = 5 * 60_000;

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

/** The nodes that dialled again after `from` (their own "link up" log line), and the most in any one second. */
function reconnects(fleet: ProcFleet, from: number): { count: number; peak: number } {
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

/** The fleet of real processes: each one's own log says when it dialled again. */
interface ProcFleet extends Fleet {
  runs: Running[];
}

async function scenario(servers: number, n: number): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), `bench-fleet-${servers}-`));
  const dir = join(base, "mesh");
  const fleet: ProcFleet = {
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
    const times = await pushAll(fleet, tenFiles(base, "first"));
    say(
      `push --all, 10 files, publish → report: ${spread(times.map((t) => t.heard - t.stored))} (${times.length}/${n} reports)`,
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
    const unheard = [...digests].filter(([node, d]) => fleet.reports.get(node)?.digest !== d);
    const stored = await storedAnyway(dir, unheard);
    say(
      `${servers === 1 ? "server restarted" : `stream leader (server ${victim}) killed and restarted`}: back in ${formatMs(upAgainMs)}; every node heard again ${formatMs(backMs)} after the stop; ${dialled.count} nodes dialled again, at most ${dialled.peak} in one second (a fifth of the fleet is ${Math.ceil(n / 5)}); reports lost: ${unheard.length - stored}${stored ? ` (${stored} more stored in REPORTS whose core copy the bench never heard)` : ""}`,
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

async function main(): Promise<void> {
  process.env.MESH_HOST_BIN ??= ensureSea();
  // `--upgrade`: the fleet upgraded from the mesh's releases instead (scripts/bench/upgrade.ts)
  if (process.argv.includes("--upgrade")) return await upgradeBench(flagValue("nodes", 20));
  // `--baseline REF`: a healthy node's push → applied beside an older build's (scripts/bench/baseline.ts)
  const ref = process.argv[process.argv.indexOf("--baseline") + 1];
  if (process.argv.includes("--baseline")) {
    if (!ref || ref.startsWith("--")) {
      process.stderr.write("bench:fleet: --baseline needs a commit (e.g. 4b88dcd)\n");
      process.exit(2);
    }
    return await baselineBench(ref, flagValue("pushes", 10));
  }
  // `--push-cost N`: a push's own bookkeeping against the bus's price of a write (scripts/bench/push-cost.ts)
  if (process.argv.includes("--push-cost")) return await pushCostBench(flagValue("push-cost", 10_000));
  // `--simulated N`: N nodes simulated in this one process (scripts/bench/simulated.ts)
  if (process.argv.includes("--simulated")) return await simulated(flagValue("simulated", 10_000));
  const n = flagValue("nodes", 100);
  say(
    `# bench:fleet — ${new Date().toISOString().slice(0, 10)}, ${n} nodes, heartbeat every ${HEARTBEAT_S} s`,
  );
  await scenario(1, n);
  await scenario(3, n);
}

async function simulated(n: number): Promise<void> {
  say(
    `# bench:fleet --simulated — ${new Date().toISOString().slice(0, 10)}, ${n} nodes in ${SIM_THREADS} worker thread${SIM_THREADS > 1 ? "s" : ""} beside the bench's own`,
  );
  if (!process.argv.includes("--cluster-only")) await simulatedScenario(1, n);
  if (!process.argv.includes("--single-only")) await simulatedScenario(3, n);
}

main().catch((e) => {
  process.stderr.write(`bench:fleet: ${(e as Error).message}\n`);
  process.exit(1);
});
