// A real systemd as PID 1 of a systemd-nspawn container of a debootstrapped Debian root (packaging.md,
// "A real systemd and a real cluster for tests"), and the command port that reaches inside it.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { packageApplier } from "../../src/appliers/arch/package.ts";
import { processApplier } from "../../src/appliers/arch/process.ts";
import { serviceApplier } from "../../src/appliers/arch/service.ts";
import { registered } from "../../src/appliers/index.ts";
import { PORTABLE_APPLIERS } from "../../src/appliers/portable/index.ts";
import type { Exec, ExecOptions, ExecResult } from "../../src/appliers/types.ts";
import type { ApplyResult } from "../../src/apply/index.ts";
import { appliersOf, type Host } from "../../src/hosts/index.ts";
import { type Records, State } from "../../src/store/index.ts";
import { localExec } from "../../src/system/index.ts";
import { applyRaw } from "./offline.ts";
import { killGroup, spawnGroup } from "./processes.ts";
import { ensureSea, type SeaMachine, seaMachine } from "./sea.ts";
import { tempDir } from "./tmp.ts";

/** Where the root tarball is kept between runs; CI keeps this directory (or points the variable elsewhere). */
export const CACHE_DIR = process.env.MESH_HOST_TEST_CACHE ?? "/var/cache/mesh-host-test";
/** Bump when the root's contents change, so a stale cache is rebuilt rather than trusted (and in ci-arch-setup.sh). */
const ROOT_FORMAT = "bookworm-1";
export const ROOT_TARBALL = join(CACHE_DIR, `debian-root-${ROOT_FORMAT}.tar.gz`);
/** Unpacked on a tmpfs it takes ~1.5 s; on this machine's disk ~8 s (the time is all metadata writes). */
const WORK_DIR = process.env.MESH_HOST_TEST_WORK ?? (existsSync("/dev/shm") ? "/dev/shm" : "/var/tmp");
// failure bounds for a busy machine, not paces
const BOOT_TIMEOUT_MS = 180_000;
const POWEROFF_TIMEOUT_MS = 60_000;

/** The port the host itself uses (src/system/exec.ts): argv on this machine, no shell. */
export const hostExec: Exec = localExec();

/** Run a command that must succeed (harness plumbing, not the code under test). */
export async function must(argv: string[], opts?: ExecOptions): Promise<string> {
  const r = await hostExec.run(argv, opts);
  if (r.code !== 0)
    throw new Error(
      `${argv.join(" ")} exited ${r.code ?? r.signal ?? r.spawnError}: ${r.stderr.trim() || r.stdout.trim()}`,
    );
  return r.stdout;
}

/** The cached root tarball, built once (~40 s) by scripts/ci-arch-root.sh if absent. */
export async function ensureRootTarball(): Promise<string> {
  if (existsSync(ROOT_TARBALL)) return ROOT_TARBALL;
  if ((await hostExec.run(["debootstrap", "--version"])).spawnError)
    throw new Error("debootstrap is not installed: run scripts/ci-arch-setup.sh (as root) first");
  const script = fileURLToPath(new URL("../../scripts/ci-arch-root.sh", import.meta.url));
  const mirror = process.env.MESH_HOST_TEST_MIRROR ?? "";
  await must(["sh", script, ROOT_TARBALL, mirror], { timeoutMs: 600_000 });
  return ROOT_TARBALL;
}

export interface Container {
  /** The container's root directory as this machine sees it: what a test gives appliers as `ports.root`. */
  root: string;
  /** The container's PID 1 (its systemd), as this machine numbers it. */
  leader: number;
  /** The command port into the container: argv runs there via `nsenter -t <leader> -a`. */
  exec: Exec;
  /** `systemctl …` inside the container, for a test's own assertions. */
  systemctl(...args: string[]): Promise<ExecResult>;
  /** Power it off and delete its root. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The child of `parent` named exactly `name`, or null. */
function childNamed(parent: number, name: string): number | null {
  const r = spawnSync("pgrep", ["-P", String(parent), "-x", name], { encoding: "utf8" });
  const pid = Number.parseInt(r.stdout.trim().split("\n")[0] ?? "", 10);
  return Number.isFinite(pid) ? pid : null;
}

/** Unpack the cached root and boot it; resolves once its systemd says `running` (or `degraded`). */
export async function bootContainer(): Promise<Container> {
  if (process.getuid?.() !== 0) throw new Error("booting a systemd container needs root");
  if ((await hostExec.run(["systemd-nspawn", "--version"])).spawnError)
    throw new Error("systemd-nspawn is not installed: run scripts/ci-arch-setup.sh (as root) first");
  const tarball = await ensureRootTarball();
  const dir = mkdtempSync(join(WORK_DIR, "mesh-host-nspawn-"));
  const root = join(dir, "root");
  mkdirSync(root);
  await must(["tar", "-C", root, "-xzf", tarball]);
  const log = openSync(join(dir, "nspawn.log"), "a");
  // a group of its own, killed with the test process however it ends
  const nspawn = spawnGroup(
    "systemd-nspawn",
    [
      "-D",
      root,
      "--register=no",
      "--keep-unit",
      "-b",
      "--console=passive",
      `--machine=mesh-test-${process.pid}`,
    ],
    { stdio: ["ignore", log, log] },
  );
  nspawn.unref();
  const nspawnPid = nspawn.pid!;
  let leader: number | null = null;
  // a test process that dies without its afterAll still takes its container (and ~240 MB of tmpfs) with it
  const cleanup = () => {
    killContainer(leader, nspawnPid);
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", cleanup);

  const deadline = Date.now() + BOOT_TIMEOUT_MS;
  while (leader === null) {
    if (!alive(nspawnPid) || Date.now() > deadline) throw bootFailure(dir, "systemd never appeared");
    leader = childNamed(nspawnPid, "systemd");
    if (leader === null) await sleep(50);
  }
  const exec: Exec = {
    run: (argv, opts) => hostExec.run(["nsenter", "-t", String(leader), "-a", ...argv], opts),
  };
  for (;;) {
    const r = await exec.run(["systemctl", "is-system-running"]);
    const state = r.stdout.trim();
    if (state === "running" || state === "degraded") break;
    if (Date.now() > deadline) throw bootFailure(dir, `is-system-running says "${state}"`);
    await sleep(100);
  }
  const systemctl = (...args: string[]) => exec.run(["systemctl", ...args]);

  return {
    root,
    leader,
    exec,
    systemctl,
    async stop() {
      await exec.run(["systemctl", "poweroff"]);
      const until = Date.now() + POWEROFF_TIMEOUT_MS;
      while (alive(nspawnPid) && Date.now() < until) await sleep(50);
      cleanup();
      process.removeListener("exit", cleanup);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * SIGKILL a container: its init first (the kernel ends every process of its PID namespace with it, though
 * they are in sessions of their own), then systemd-nspawn's group.
 */
export function killContainer(init: number | null, nspawnPid: number): void {
  if (init !== null)
    try {
      process.kill(init, "SIGKILL");
    } catch {
      // gone already
    }
  killGroup(nspawnPid);
}

function bootFailure(dir: string, what: string): Error {
  let log = "";
  try {
    log = readFileSync(join(dir, "nspawn.log"), "utf8").split("\n").slice(-20).join("\n");
  } catch {
    // no log to show
  }
  return new Error(`the test container did not boot: ${what}\n${log}`);
}

/** The Arch host as a test builds it: the portable floor and the Arch appliers, each reaching out through `exec`. */
export function archHost(): Host {
  const appliers = appliersOf({
    ...PORTABLE_APPLIERS,
    service: registered(serviceApplier),
    package: registered(packageApplier),
    process: registered(processApplier),
  });
  return {
    kind: "arch",
    appliers,
    support: { supports: (type) => appliers.has(type), reason: "not implemented on the Arch host" },
  };
}

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

export interface ArchMachine {
  root: string;
  state: State;
  /** Parse (refusing as on arrival) and apply, the way the CLI does; `parsed: false` when refused on arrival. */
  apply(raw: unknown, opts?: { dryRun?: boolean }): Promise<ApplyResult>;
  records(): Records;
  /** Overwrite the records file, as a hand edit or an older host would have left it. */
  writeRecords(records: Records): void;
}

/** A machine whose root is `root` and whose commands run through `exec`, with its state in `stateDir`. */
export function archMachine(root: string, exec: Exec, stateDir: string): ArchMachine {
  const state = new State(stateDir);
  const host = archHost();
  return {
    root,
    state,
    apply: (raw, opts = {}) =>
      applyRaw(
        raw,
        { host, state, ports: { root, exec, rootless: false, log: quiet }, source: "link" },
        opts.dryRun,
      ),
    records: () => state.readRecords().records,
    writeRecords(records) {
      state.ensure().writeRecords(records, Object.keys(records));
    },
  };
}

/** A machine on `root` through `exec` with a state directory of its own, new each call: a test's fresh start. */
export const freshArchMachine = (root: string, exec: Exec): ArchMachine =>
  archMachine(root, exec, tempDir("mesh-arch-state-"));

/**
 * One container for a whole test file: booted before its first test and handed to `use` (the first run on a
 * machine builds the cached root, ~40-60 s, more on a slow mirror; later ones take ~2 s), stopped after its last.
 */
export function containerForFile(use: (c: Container) => void): void {
  let c: Container | undefined;
  beforeAll(async () => {
    c = await bootContainer();
    use(c);
  }, 600_000);
  afterAll(async () => {
    await c?.stop();
  });
}

/** A report in-process or from the built executable (none when it refused). */
type Reported = Pick<ApplyResult, "plan"> & { report?: Pick<ApplyResult["report"], "steps"> };
/** Did of each step, `id:did`, in the report's order. */
export const dids = (r: Reported): string[] => (r.report?.steps ?? []).map((s) => `${s.id}:${s.did}`);
/** The report's detail of step `id`. */
export const detailOf = (r: Reported, id: string): string =>
  r.report?.steps.find((s) => s.id === id)?.detail ?? "";
/** Did of each planned step, `id:did`. */
export const planned = (r: Reported): string[] => r.plan.map((s) => `${s.id}:${s.did}`);

let seaCount = 0;

/**
 * The built executable inside the container, run there as root over its `/` with a state directory of its
 * own: the way an operator runs `mesh-host apply` on the machine. `state` is where this process reads it.
 */
export function seaInContainer(c: Container): SeaMachine & { state: State } {
  const bin = "/usr/local/bin/mesh-host";
  if (!existsSync(join(c.root, bin))) copyFileSync(ensureSea(), join(c.root, bin));
  const n = seaCount++;
  const there = `/var/tmp/mesh-sea-${n}`;
  mkdirSync(join(c.root, there), { recursive: true });
  const stateDir = `/var/lib/mesh-host-test-${n}`;
  const sea = seaMachine({ exec: c.exec, bin, root: "/", state: stateDir, here: join(c.root, there), there });
  return { ...sea, state: new State(join(c.root, stateDir)) };
}
