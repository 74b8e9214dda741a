// Real container runtimes for the container tests (containers.md, "Testing here"): dockerd from Debian's
// docker.io with its own data root, exec root and socket; podman 4.3 with its own storage, runc and the ulimits
// this machine allows. No registry is reachable: the one image is a busybox root imported by the runtime.
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runtimeAppliers } from "../../src/appliers/arch/containers/index.ts";
import { PORTABLE_APPLIERS } from "../../src/appliers/portable/index.ts";
import type { Exec, ExecResult } from "../../src/appliers/types.ts";
import type { ApplyResult, Unseal } from "../../src/apply/index.ts";
import { type GivenSecrets, unsealerFor } from "../../src/cli/unseal.ts";
import { appliersOf, type Host } from "../../src/hosts/index.ts";
import { State } from "../../src/store/index.ts";
import { givenRuntimes, type RuntimeCommand } from "../../src/system/arch/runtime.ts";
import { localExec } from "../../src/system/index.ts";
import { INSTALLER_SECRET } from "../../src/vocabulary/index.ts";
import { applyRaw } from "./offline.ts";
import { groupAlive, killGroup, spawnGroup } from "./processes.ts";

export const IMAGE = "mesh-test/busybox:1";
/** PID 1 that stops at once on SIGTERM (a bare `sleep` as PID 1 ignores it, and every stop would wait 10 s). */
export const SLEEPER = ["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"];
// failure bounds for a busy machine, never paces: how long a daemon may take to answer, or to stop on SIGTERM
const START_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 60_000;
const exec = localExec();

export interface TestRuntime {
  kind: "docker" | "podman";
  cmd: RuntimeCommand;
  /** The runtime's own client, for a test's assertions (not the code under test). */
  run(...args: string[]): Promise<ExecResult>;
  /** Stop it and leave the machine as it was. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Install what the runtimes need when missing (CI, as root): scripts/ci-containers-setup.sh. */
function ensureInstalled(): string | null {
  const needed = [
    "/usr/sbin/dockerd",
    "/usr/bin/docker",
    "/usr/bin/podman",
    "/bin/busybox",
    "/usr/sbin/runc",
  ];
  if (needed.every((p) => existsSync(p))) return null;
  if (process.getuid?.() !== 0)
    return `not root, and ${needed.filter((p) => !existsSync(p)).join(", ")} missing`;
  const script = fileURLToPath(new URL("../../scripts/ci-containers-setup.sh", import.meta.url));
  const r = spawnSync("sh", [script], { encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0)
    return `scripts/ci-containers-setup.sh failed: ${(r.stderr || r.stdout).trim().slice(-400)}`;
  const still = needed.filter((p) => !existsSync(p));
  return still.length ? `still missing after setup: ${still.join(", ")}` : null;
}

/** A busybox root (one symlink per applet, `busybox` itself skipped), imported as IMAGE. */
function importBusybox(importArgv: string[], env: Record<string, string>): string | null {
  const dir = mkdtempSync("/tmp/mesh-bbroot-");
  try {
    for (const d of ["bin", "etc", "tmp", "proc", "sys", "dev", "run"]) mkdirSync(join(dir, d));
    spawnSync("cp", ["/bin/busybox", join(dir, "bin/busybox")]);
    const applets = spawnSync("/bin/busybox", ["--list"], { encoding: "utf8" }).stdout.split("\n");
    for (const a of applets) if (a && a !== "busybox") symlinkSync("busybox", join(dir, "bin", a));
    writeFileSync(
      join(dir, "etc/passwd"),
      "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
    );
    writeFileSync(join(dir, "etc/group"), "root:x:0:\nnogroup:x:65534:\n");
    const tar = spawnSync("tar", ["-C", dir, "-c", "."], { maxBuffer: 64 * 1024 * 1024 });
    const r = spawnSync(
      importArgv[0]!,
      [...importArgv.slice(1), "import", "--change", "ENV PATH=/bin", "-", IMAGE],
      {
        input: tar.stdout,
        env: { PATH: process.env.PATH, ...env },
        encoding: "utf8",
      },
    );
    return r.status === 0 ? null : `import failed: ${r.stderr.trim().slice(-300)}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function wrap(kind: TestRuntime["kind"], cmd: RuntimeCommand, stop: () => Promise<void>): TestRuntime {
  return {
    kind,
    cmd,
    run: (...args) => exec.run([...cmd.argv, ...args], { env: cmd.env, timeoutMs: 60_000 }),
    stop,
  };
}

/** iptables rules and chains dockerd made, and docker0, removed once it has stopped (only what it made). */
export function cleanDockerNetworking(before: { chains: boolean; forward: string; bridge: boolean }): void {
  if (!before.bridge) spawnSync("ip", ["link", "delete", "docker0"]);
  if (before.chains) return;
  for (const table of ["filter", "nat"]) {
    const rules = spawnSync("iptables", ["-t", table, "-S"], { encoding: "utf8" }).stdout.split("\n");
    for (const rule of rules)
      if (rule.startsWith("-A ") && /DOCKER|docker0|br-[0-9a-f]{12}/.test(rule) && !/^-A DOCKER/.test(rule))
        spawnSync("sh", ["-c", `iptables -t ${table} ${rule.replace(/^-A /, "-D ")}`]);
    for (const rule of rules)
      if (rule.startsWith("-N DOCKER")) spawnSync("iptables", ["-t", table, "-F", rule.slice(3)]);
    for (const rule of rules)
      if (rule.startsWith("-N DOCKER")) spawnSync("iptables", ["-t", table, "-X", rule.slice(3)]);
  }
  if (before.forward) spawnSync("iptables", ["-P", "FORWARD", before.forward]);
}

/** dockerd from docker.io in a temporary directory; a string says why it cannot run here. */
export async function startDocker(): Promise<TestRuntime | string> {
  const missing = ensureInstalled();
  if (missing) return missing;
  const dir = mkdtempSync("/tmp/mesh-dockerd-");
  const sock = join(dir, "docker.sock");
  const iptables = spawnSync("iptables", ["-S"], { encoding: "utf8" }).stdout ?? "";
  const before = {
    chains: /^-N DOCKER$/m.test(iptables),
    forward: /^-P FORWARD (\w+)/m.exec(iptables)?.[1] ?? "",
    bridge: existsSync("/sys/class/net/docker0"),
  };
  const log = openSync(join(dir, "dockerd.log"), "a");
  const daemon = spawnGroup(
    "/usr/sbin/dockerd",
    [
      "--data-root",
      join(dir, "data"),
      "--exec-root",
      join(dir, "exec"),
      "-H",
      `unix://${sock}`,
      "--pidfile",
      join(dir, "dockerd.pid"),
    ],
    { stdio: ["ignore", log, log] },
  );
  // its group (containerd with it) is SIGKILLed if the test process ends before stop()
  const pid = daemon.pid!;
  daemon.unref();
  const cmd: RuntimeCommand = {
    kind: "docker",
    argv: ["/usr/bin/docker"],
    env: { DOCKER_HOST: `unix://${sock}` },
  };
  const stop = async () => {
    const rt = wrap("docker", cmd, async () => {});
    const ids = (await rt.run("container", "ls", "-aq")).stdout.split("\n").filter(Boolean);
    if (ids.length) await rt.run("container", "rm", "-f", ...ids);
    try {
      process.kill(pid, "SIGTERM");
    } catch {}
    const until = Date.now() + STOP_TIMEOUT_MS;
    while (alive(pid) && Date.now() < until) await sleep(50);
    // dockerd gone, and anything it left in its group (a containerd that outlived it) with it
    killGroup(pid);
    while (groupAlive(pid)) await sleep(20);
    spawnSync("sh", [
      "-c",
      `grep -F ' ${dir}/' /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l`,
    ]);
    cleanDockerNetworking(before);
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const r = await exec.run([...cmd.argv, "version", "--format", "{{.Server.Version}}"], {
      env: cmd.env,
      timeoutMs: 5000,
    });
    if (r.code === 0) break;
    if (!alive(pid) || Date.now() > deadline) {
      const tail = readFileSync(join(dir, "dockerd.log"), "utf8").trim().split("\n").slice(-3).join(" | ");
      await stop();
      return `dockerd did not start: ${tail}`;
    }
    await sleep(100);
  }
  const imported = importBusybox(cmd.argv, cmd.env);
  if (imported) {
    await stop();
    return imported;
  }
  return wrap("docker", cmd, stop);
}

/** podman with its own storage, runc and ulimits within this machine's (a --ulimit replaces the defaults). */
export async function startPodman(): Promise<TestRuntime | string> {
  const missing = ensureInstalled();
  if (missing) return missing;
  const dir = mkdtempSync("/tmp/mesh-podman-");
  writeFileSync(
    join(dir, "containers.conf"),
    [
      "[containers]",
      'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
      "[engine]",
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `tmp_dir = "${join(dir, "tmp")}"`,
      "[network]",
      `network_config_dir = "${join(dir, "networks")}"`,
      "",
    ].join("\n"),
  );
  const cmd: RuntimeCommand = {
    kind: "podman",
    argv: ["/usr/bin/podman", "--root", join(dir, "storage"), "--runroot", join(dir, "run")],
    env: { CONTAINERS_CONF: join(dir, "containers.conf") },
  };
  const rt = wrap("podman", cmd, async () => {});
  // podman is no daemon: what outlives a test is a container's conmon, which only podman itself ends
  const removeNow = () =>
    spawnSync(cmd.argv[0]!, [...cmd.argv.slice(1), "container", "rm", "--all", "--force", "--time", "0"], {
      env: { ...process.env, ...cmd.env },
      stdio: "ignore",
      timeout: 60_000,
    });
  process.once("exit", removeNow);
  const stop = async () => {
    process.removeListener("exit", removeNow);
    await rt.run("container", "rm", "--all", "--force", "--time", "0");
    await rt.run("network", "prune", "--force");
    await rt.run("system", "reset", "--force");
    spawnSync("sh", [
      "-c",
      `grep -F ' ${dir}/' /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l`,
    ]);
    rmSync(dir, { recursive: true, force: true });
  };
  const info = await rt.run("info", "--format", "{{.Host.OCIRuntime.Name}}");
  if (info.code !== 0) {
    await stop();
    return `podman does not answer: ${info.stderr.trim().slice(-300)}`;
  }
  const imported = importBusybox(cmd.argv, cmd.env);
  if (imported) {
    await stop();
    return imported;
  }
  return wrap("podman", cmd, stop);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Every runtime call the host makes, counted (the port wrapped, nothing else changed). */
export function countingExec(inner: Exec = exec): Exec & { calls: string[][]; reset(): void } {
  const calls: string[][] = [];
  return {
    calls,
    reset: () => {
      calls.length = 0;
    },
    run(argv, opts) {
      calls.push(argv);
      return inner.run(argv, opts);
    },
  };
}

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

export interface RuntimeMachine {
  root: string;
  stateDir: string;
  exec: ReturnType<typeof countingExec>;
  apply(d: unknown, opts?: { dryRun?: boolean }): Promise<ApplyResult>;
  /** Remove its root and state (the runtime's objects are the test's to remove). */
  dispose(): void;
}

/**
 * A host with the floor and the four runtime appliers over `rt`, applying to a temporary root. `secrets`:
 * sealed value → bytes; `given`: what `--secret NAME=FILE` gave, opened by the CLI's own unsealer.
 */
export function runtimeMachine(
  rt: TestRuntime,
  secrets: Record<string, Uint8Array> = {},
  given: GivenSecrets = new Map(),
): RuntimeMachine {
  const base = mkdtempSync("/tmp/mesh-ctest-");
  const root = join(base, "root");
  mkdirSync(root);
  const appliers = appliersOf({ ...PORTABLE_APPLIERS, ...runtimeAppliers(givenRuntimes([rt.cmd])) });
  const host: Host = {
    kind: "arch",
    appliers,
    support: { supports: (t) => appliers.has(t), reason: "not here" },
  };
  const counted = countingExec();
  return {
    root,
    stateDir: join(base, "state"),
    exec: counted,
    dispose: () => rmSync(base, { recursive: true, force: true }),
    apply(raw, opts = {}) {
      const state = new State(join(base, "state"));
      const unseal: Unseal = (sealed, name) =>
        sealed === INSTALLER_SECRET
          ? unsealerFor(state, given)(sealed, name)
          : secrets[sealed]
            ? { ok: true, bytes: secrets[sealed]! }
            : { ok: false, reason: "is not sealed to this node" };
      return applyRaw(
        raw,
        { host, state, ports: { root, exec: counted, rootless: false, log: quiet }, unseal },
        opts.dryRun,
      );
    },
  };
}
