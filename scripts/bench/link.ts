// What is not an apply: the executable's and the package's size, and the link through the mesh double:
// time to the first heartbeat, idle RSS and messages over an idle window, push-to-applied latency, and RSS
// growth over many declarations. Until `run` is in the build those rows say "not yet" and why.
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Msg } from "@nats-io/transport-node";
import { MeshDouble } from "../../test/mesh/index.ts";
import { benchFiles, declarationOf, tempDir } from "./fixture.ts";
import { runTimed, vmRssKb } from "./proc.ts";
import { type Executable, REPO } from "./runners.ts";
import { percentile } from "./stats.ts";

export interface Sizes {
  exe: { file: string; bytes: number } | null;
  packages: { file: string; bytes: number }[];
}

export function sizes(exe: Executable): Sizes {
  const dist = join(REPO, "dist");
  const packages = existsSync(dist)
    ? readdirSync(dist)
        .filter((f) => f.endsWith(".pkg.tar.zst"))
        .map((f) => ({ file: `dist/${f}`, bytes: statSync(join(dist, f)).size }))
    : [];
  return { exe: exe.file ? { file: exe.file, bytes: statSync(exe.file).size } : null, packages };
}

/** The arguments of `run` in one place, for when its flags settle. */
export const RUN_ARGS = (state: string, root: string) => ["run", "--state", state, "--root", root];
const NODE = "bench";
const REPORT_WAIT_MS = 10_000;
const FIRST_HEARTBEAT_WAIT_MS = 15_000;

/** Null when this build's `mesh-host run` starts; otherwise why the link rows cannot be measured yet. */
export async function runNotYet(exe: Executable): Promise<string | null> {
  const state = tempDir("mesh-bench-probe-");
  try {
    const r = await runTimed([...exe.argv, ...RUN_ARGS(state, state)], { timeoutMs: 3000, rss: false });
    if (/not available in this build/.test(r.stderr))
      return `\`mesh-host run\` is not in this build (src/cli/cli.ts has no handler for "run" yet)`;
    return null;
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
}

export interface MeshOptions {
  /** Seconds of idle `run` before its RSS and its message count are read (60; quick 10). */
  idleS: number;
  /** Pushes timed one by one, publish to report received (200). */
  pushes: number;
  /** Declarations pushed afterwards to look for a leak (2,000; quick 200). */
  leak: number;
  say: (line: string) => void;
}

export interface MeshResults {
  firstHeartbeatMs: number;
  idleS: number;
  idleRssKb: number | null;
  idleMessages: { host: number | null; server: number };
  heartbeatsInIdle: number;
  latencyMs: { p50: number; p90: number; p99: number; n: number };
  /** RSS before, half way and after: a leak grows in both halves, a runtime warming up mostly in the first. */
  leak: { pushed: number; rssBeforeKb: number | null; rssMidKb: number | null; rssAfterKb: number | null };
  /**
   * The same start as systemd makes it: the launcher hands the binary's digests over in the environment
   * (MESH_HOST_SHA256, MESH_HOST_INSTALLED_SHA256), so `run` does not hash its own ~100 MB executable.
   */
  launched: { firstHeartbeatMs: number; rssKb: number | null; afterS: number } | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`no ${what} within ${ms} ms`);
    await sleep(1);
  }
}

async function monitor(url: string): Promise<{ server: number; host: number | null }> {
  const varz = (await (await fetch(`${url}/varz`)).json()) as { in_msgs: number; out_msgs: number };
  const connz = (await (await fetch(`${url}/connz?limit=1024`)).json()) as {
    connections?: { name?: string; in_msgs: number; out_msgs: number }[];
  };
  const hosts = (connz.connections ?? []).filter((c) => c.name !== "mesh-double");
  const host = hosts.length ? hosts.reduce((s, c) => s + c.in_msgs + c.out_msgs, 0) : null;
  return { server: varz.in_msgs + varz.out_msgs, host };
}

/** A 10-file declaration; `k` changes one file, so every push is a real (small) apply. */
function tenFiles(k: number) {
  const files = benchFiles(10, "/bench-link");
  files[0] = { ...files[0]!, content: `push ${k}\n` };
  return declarationOf(files, NODE);
}

/** The digest the launcher computes before it starts the host (streamed: the executable is ~100 MB). */
async function sha256OfFile(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** `mesh-host run` as a child, heard through the double; stopped by SIGTERM (SIGKILL after 10 s). */
class RunningHost {
  child: ChildProcess | null = null;
  readonly beats: number[] = [];
  readonly reports = new Map<number, number>();

  constructor(
    private readonly exe: Executable,
    private readonly stateDir: string,
    private readonly root: string,
  ) {}

  listen(double: MeshDouble): void {
    double.nc.subscribe(`mesh.heartbeat.${NODE}`, {
      callback: () => {
        this.beats.push(performance.now());
      },
    });
    double.nc.subscribe(`mesh.report.${NODE}`, {
      callback: (_err: Error | null, m: Msg) => {
        const at = performance.now();
        try {
          // a signed node message: the report is its body (the double verifies it; here only the time counts)
          const body = (m.json() as { body?: string }).body ?? "{}";
          const seq = (JSON.parse(body) as { declaration?: { seq?: number } }).declaration?.seq;
          if (typeof seq === "number" && !this.reports.has(seq)) this.reports.set(seq, at);
        } catch {
          // not a report we can read: the double records it
        }
      },
    });
  }

  /** Start `run`; resolves with the time from spawn to its first heartbeat. */
  async start(env?: NodeJS.ProcessEnv): Promise<number> {
    const heard = this.beats.length;
    const t0 = performance.now();
    const [bin, ...args] = [...this.exe.argv, ...RUN_ARGS(this.stateDir, this.root)];
    this.child = spawn(bin!, args, {
      stdio: ["ignore", "ignore", "ignore"],
      env: { ...process.env, ...env },
    });
    await until(() => this.beats.length > heard, FIRST_HEARTBEAT_WAIT_MS, "first heartbeat");
    return this.beats[heard]! - t0;
  }

  rssKb(): number | null {
    return this.child?.pid ? vmRssKb(this.child.pid) : null;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await gone;
    clearTimeout(killer);
  }
}

/** The link rows: a real nats-server (the mesh double), the host under `run`, the double as its controller. */
export async function meshRows(exe: Executable, o: MeshOptions): Promise<MeshResults> {
  const double = await MeshDouble.start();
  const stateDir = tempDir("mesh-bench-run-state-");
  const root = tempDir("mesh-bench-run-root-");
  const host = new RunningHost(exe, stateDir, root);
  try {
    // enrolled the way a person does it, so keys and membership are what `run` expects
    const { code } = await double.enrolmentCode(NODE);
    const enrol = await runTimed([...exe.argv, "enrol", code, "--state", stateDir, "--root", root], {
      timeoutMs: 30_000,
      rss: false,
    });
    if (enrol.code !== 0)
      throw new Error(`mesh-host enrol exited ${enrol.code}: ${enrol.stderr.trim().slice(-300)}`);
    host.listen(double);
    await double.nc.flush();
    const firstHeartbeatMs = await host.start();
    o.say(`link: first heartbeat after ${firstHeartbeatMs.toFixed(0)} ms; idle for ${o.idleS} s`);
    const before = await monitor(double.monitorUrl);
    const beatsBefore = host.beats.length;
    await sleep(o.idleS * 1000);
    const after = await monitor(double.monitorUrl);
    const heartbeatsInIdle = host.beats.length - beatsBefore;
    const idleRssKb = host.rssKb();
    const push = async (k: number): Promise<number> => {
      const t = performance.now();
      const seq = await double.declare(NODE, tenFiles(k));
      await until(() => host.reports.has(seq), REPORT_WAIT_MS, `report for declaration ${seq}`);
      return host.reports.get(seq)! - t;
    };
    o.say(`link: ${o.pushes} pushes of a 10-file declaration`);
    const lat: number[] = [];
    for (let k = 0; k < o.pushes; k++) lat.push(await push(k));
    const rssBeforeKb = host.rssKb();
    o.say(`link: ${o.leak} more declarations, looking for a leak`);
    let rssMidKb: number | null = null;
    for (let k = 0; k < o.leak; k++) {
      if (k === Math.floor(o.leak / 2)) rssMidKb = host.rssKb();
      await push(o.pushes + k);
    }
    const rssAfterKb = host.rssKb();
    await host.stop();
    let launched: MeshResults["launched"] = null;
    if (exe.file) {
      const digest = await sha256OfFile(exe.file);
      const afterS = Math.min(o.idleS, 10);
      o.say(`link: started again as the launcher starts it (digests given); idle for ${afterS} s`);
      const ms = await host.start({ MESH_HOST_SHA256: digest, MESH_HOST_INSTALLED_SHA256: digest });
      await sleep(afterS * 1000);
      launched = { firstHeartbeatMs: ms, rssKb: host.rssKb(), afterS };
    }
    return {
      firstHeartbeatMs,
      idleS: o.idleS,
      idleRssKb,
      idleMessages: {
        host: before.host === null || after.host === null ? null : after.host - before.host,
        server: after.server - before.server,
      },
      heartbeatsInIdle,
      latencyMs: {
        p50: percentile(lat, 50),
        p90: percentile(lat, 90),
        p99: percentile(lat, 99),
        n: lat.length,
      },
      leak: { pushed: o.leak, rssBeforeKb, rssMidKb, rssAfterKb },
      launched,
    };
  } finally {
    await host.stop();
    await double.stop();
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  }
}
