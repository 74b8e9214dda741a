// WireGuard machines for the overlay tests (overlay.md, "Testing here"). No kernel module here: each machine is
// a network namespace whose WireGuard is wireguard-go, in a private mount namespace with its own /run/wireguard
// (the control socket is not per network namespace) and its own /etc/wireguard — a bind of `<root>/etc/wireguard`,
// so what the applier writes under its root is what wg-quick reads. A machine with systemd is a container
// booted with a private network, with the host's wg, wg-quick, wireguard-go and ip copied into its root.
// Machines are joined by veth pairs; only their own addresses are ever sent to.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type OverlayPorts, overlayApplier } from "../../src/appliers/arch/overlay/overlay.ts";
import { registered } from "../../src/appliers/index.ts";
import { PORTABLE_APPLIERS } from "../../src/appliers/portable/index.ts";
import type { Exec, ExecOptions, ExecResult } from "../../src/appliers/types.ts";
import type { ApplyResult } from "../../src/apply/index.ts";
import { appliersOf, type Host } from "../../src/hosts/index.ts";
import {
  makeKeys,
  makeOverlayKey,
  OverlayState,
  privateB64,
  publicB64,
  State,
  StoreOriginals,
  saveKey,
  saveKeys,
} from "../../src/store/index.ts";
import type { KeyPair } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS } from "./events.ts";
import { applyRaw } from "./offline.ts";
import { spawnGroup } from "./processes.ts";
import { ensureSea, type SeaMachine, seaMachine } from "./sea.ts";
import { runMarkerEnv } from "./strays.ts";
import { ensureRootTarball, hostExec, killContainer, must } from "./systemd.ts";
import { tempDir } from "./tmp.ts";

// failure bounds for a busy machine, not paces
const BOOT_TIMEOUT_MS = 180_000;
const POWEROFF_TIMEOUT_MS = 60_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let counter = 0;
/** Names in the host's namespace are this process's own, so test files running side by side never meet. */
const unique = (prefix: string) => `${prefix}${process.pid % 100000}${(counter++).toString(36)}`;

export interface Machine {
  name: string;
  /** Where the machine's declared paths are, as this process sees them: the applier's `ports.root`. */
  root: string;
  /** The command port into the machine (its network and mount namespaces): the applier's `ports.exec`. */
  exec: Exec;
  /** Its network namespace only, with this machine's own binaries: for plumbing. */
  net: Exec;
  /** A process inside it, for `ip link set … netns <pid>`. */
  pid: number;
  systemd: boolean;
  /** Run in the machine; throws unless it exits 0. */
  must(...argv: string[]): Promise<string>;
  stop(): Promise<void>;
}

// the run's name in the environment (hostExec passes PATH alone): a wireguard-go left running is the run's
function prefixed(prefix: string[]): Exec {
  return {
    run: (argv: string[], opts?: ExecOptions) =>
      hostExec.run([...prefix, ...argv], { ...opts, env: { ...runMarkerEnv(), ...opts?.env } }),
  };
}

function mustIn(exec: Exec) {
  return async (...argv: string[]): Promise<string> => {
    const r = await exec.run(argv, { timeoutMs: 30_000 });
    if (r.code !== 0)
      throw new Error(`${argv.join(" ")}: exit ${r.code ?? r.spawnError}: ${r.stderr.trim()}`);
    return r.stdout;
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

let installed: Promise<void> | null = null;

/** The tools these machines are made of, installed by scripts/ci-overlay-setup.sh where a fresh machine lacks them. */
export function ensureWireguard(): Promise<void> {
  installed ??= (async () => {
    const have = spawnSync("sh", [
      "-c",
      "command -v wg && command -v wg-quick && command -v wireguard-go && command -v ping",
    ]);
    if (have.status === 0) return;
    const script = fileURLToPath(new URL("../../scripts/ci-overlay-setup.sh", import.meta.url));
    await must(["sh", script], { timeoutMs: 600_000 });
  })();
  return installed;
}

/** A network namespace with a private mount namespace: wireguard-go, wg-quick, no systemd. */
export async function netnsMachine(): Promise<Machine> {
  await ensureWireguard();
  const name = unique("mhwg");
  const base = mkdtempSync(join(tmpdir(), "mesh-wg-"));
  const root = join(base, "root");
  const etc = join(root, "etc/wireguard");
  const run = join(base, "run");
  mkdirSync(etc, { recursive: true, mode: 0o700 });
  mkdirSync(run, { mode: 0o700 });
  // the mount points the private mounts go over (the host's own stay empty)
  mkdirSync("/run/wireguard", { recursive: true });
  mkdirSync("/etc/wireguard", { recursive: true });
  await must(["ip", "netns", "add", name]);
  await must(["ip", "-n", name, "link", "set", "lo", "up"]);
  const holder = spawnGroup(
    "ip",
    [
      "netns",
      "exec",
      name,
      "unshare",
      "-m",
      "--propagation",
      "private",
      "sh",
      "-c",
      'mount --bind "$0" /run/wireguard && mount --bind "$1" /etc/wireguard && exec sleep infinity',
      run,
      etc,
    ],
    { stdio: "ignore" },
  );
  holder.unref();
  const pid = holder.pid!;
  const deadline = Date.now() + EVENT_WAIT_MS;
  // ip, unshare and sh each exec the next: the pid is the holder's once it is `sleep`
  while (!comm(pid).startsWith("sleep")) {
    if (!alive(pid) || Date.now() > deadline)
      throw new Error(`the namespace holder for ${name} did not start`);
    await sleep(20);
  }
  const exec = prefixed(["nsenter", "-t", String(pid), "-n", "-m", "--"]);
  const stop = async () => {
    process.removeListener("exit", onExit);
    const pids = spawnSync("ip", ["netns", "pids", name], { encoding: "utf8" })
      .stdout.split(/\s+/)
      .filter(Boolean);
    // only what this machine ran: its holder and the wireguard-go each wg-quick started in it
    for (const p of pids) {
      try {
        process.kill(Number(p), "SIGKILL");
      } catch {
        // already gone
      }
    }
    spawnSync("ip", ["netns", "del", name]);
    rmSync(base, { recursive: true, force: true });
  };
  const onExit = () => void stop();
  process.once("exit", onExit);
  return { name, root, exec, net: exec, pid, systemd: false, must: mustIn(exec), stop };
}

function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

/** The host's file for a program, as `command -v` finds it. */
function which(program: string): string {
  const r = spawnSync("sh", ["-c", `command -v ${program}`], { encoding: "utf8" });
  const path = r.stdout.trim();
  if (r.status !== 0 || !path)
    throw new Error(`${program} is not installed: run scripts/ci-overlay-setup.sh`);
  return path;
}

/** Copy the host's WireGuard tools and `ip`, with the libraries the root lacks, into a Debian root of the same release. */
function installWireguard(root: string): void {
  const programs = ["wg", "wg-quick", "wireguard-go", "ip"].map(which);
  const libs = new Set<string>();
  for (const p of programs) {
    const ldd = spawnSync("ldd", [p], { encoding: "utf8" }).stdout;
    for (const m of ldd.matchAll(/=> (\/\S+)/g)) libs.add(m[1]!);
  }
  for (const file of [...programs, ...libs]) {
    const into = join(root, file);
    if (existsSync(into) && !programs.includes(file)) continue;
    mkdirSync(dirname(into), { recursive: true });
    copyFileSync(file, into);
    chmodSync(into, 0o755);
  }
  const units = join(root, "usr/lib/systemd/system");
  for (const unit of ["wg-quick@.service", "wg-quick.target"]) {
    const from = ["/lib/systemd/system", "/usr/lib/systemd/system"]
      .map((d) => join(d, unit))
      .find(existsSync);
    if (from) copyFileSync(from, join(units, unit));
  }
  mkdirSync(join(root, "etc/wireguard"), { recursive: true, mode: 0o700 });
}

/** A container whose PID 1 is systemd, on a private network of its own (so it keeps CAP_NET_ADMIN). */
export async function systemdMachine(): Promise<Machine> {
  await ensureWireguard();
  const tarball = await ensureRootTarball();
  const work = existsSync("/dev/shm") ? "/dev/shm" : "/var/tmp";
  const dir = mkdtempSync(join(work, "mesh-wg-nspawn-"));
  const root = join(dir, "root");
  mkdirSync(root);
  await must(["tar", "-C", root, "-xzf", tarball]);
  installWireguard(root);
  const log = openSync(join(dir, "nspawn.log"), "a");
  const name = unique("mesh-wg-");
  const nspawn = spawnGroup(
    "systemd-nspawn",
    [
      "-D",
      root,
      "--register=no",
      "--keep-unit",
      "-b",
      "--console=passive",
      "--private-network",
      `--machine=${name}`,
    ],
    { stdio: ["ignore", log, log] },
  );
  nspawn.unref();
  const nspawnPid = nspawn.pid!;
  let leader: number | null = null;
  const kill = () => killContainer(leader, nspawnPid);
  process.once("exit", kill);
  const deadline = Date.now() + BOOT_TIMEOUT_MS;
  while (leader === null) {
    if (!alive(nspawnPid) || Date.now() > deadline)
      throw new Error(`the container did not boot: ${nspawnLog(dir)}`);
    const r = spawnSync("pgrep", ["-P", String(nspawnPid), "-x", "systemd"], { encoding: "utf8" });
    const pid = Number.parseInt(r.stdout.trim().split("\n")[0] ?? "", 10);
    if (Number.isFinite(pid)) leader = pid;
    else await sleep(50);
  }
  const exec = prefixed(["nsenter", "-t", String(leader), "-a", "--"]);
  for (;;) {
    const state = (await exec.run(["systemctl", "is-system-running"])).stdout.trim();
    if (state === "running" || state === "degraded") break;
    if (Date.now() > deadline) throw new Error(`the container says "${state}": ${nspawnLog(dir)}`);
    await sleep(100);
  }
  return {
    name,
    root,
    exec,
    net: prefixed(["nsenter", "-t", String(leader), "-n", "--"]),
    pid: leader,
    systemd: true,
    must: mustIn(exec),
    async stop() {
      await exec.run(["systemctl", "poweroff"]);
      const until = Date.now() + POWEROFF_TIMEOUT_MS;
      while (alive(nspawnPid) && Date.now() < until) await sleep(50);
      kill();
      process.removeListener("exit", kill);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function nspawnLog(dir: string): string {
  try {
    return readFileSync(join(dir, "nspawn.log"), "utf8").split("\n").slice(-15).join("\n");
  } catch {
    return "";
  }
}

/** Join two machines by a veth pair: `10.77.<n>.1/30` on `a`, `.2` on `b`. The underlay addresses. */
export async function wire(a: Machine, b: Machine, n: number): Promise<{ a: string; b: string }> {
  const [na, nb] = [unique("va"), unique("vb")];
  await must(["ip", "link", "add", na, "type", "veth", "peer", "name", nb]);
  await must(["ip", "link", "set", na, "netns", String(a.pid)]);
  await must(["ip", "link", "set", nb, "netns", String(b.pid)]);
  const addr = { a: `10.77.${n}.1`, b: `10.77.${n}.2` };
  for (const [m, dev, ip] of [
    [a, na, addr.a],
    [b, nb, addr.b],
  ] as const) {
    await mustIn(m.net)("ip", "addr", "add", `${ip}/30`, "dev", dev);
    await mustIn(m.net)("ip", "link", "set", dev, "up");
  }
  return addr;
}

/** A WireGuard key pair as wg has them: base64 of the raw private and public keys. */
export interface WgKey {
  pair: KeyPair;
  private: string;
  public: string;
}

export function wgKey(): WgKey {
  const pair = makeOverlayKey();
  return { pair, private: privateB64(pair.privateKey), public: publicB64(pair.publicKey) };
}

export interface TunnelSpec {
  key: WgKey;
  address: string;
  port?: number;
  mtu?: number;
  peers: { key: string; allowed: string; endpoint?: string; keepalive?: number }[];
}

/** A configuration as an administrator writes one for wg-quick. */
export function tunnelConfig(t: TunnelSpec): string {
  const lines = ["[Interface]", `PrivateKey = ${t.key.private}`, `Address = ${t.address}`];
  if (t.port) lines.push(`ListenPort = ${t.port}`);
  if (t.mtu) lines.push(`MTU = ${t.mtu}`);
  for (const p of t.peers) {
    lines.push("", "[Peer]", `PublicKey = ${p.key}`, `AllowedIPs = ${p.allowed}`);
    if (p.endpoint) lines.push(`Endpoint = ${p.endpoint}`);
    if (p.keepalive) lines.push(`PersistentKeepalive = ${p.keepalive}`);
  }
  return `${lines.join("\n")}\n`;
}

/** A tunnel the machine had before the mesh: its config written, and raised by its init (or by hand). */
export async function plantTunnel(
  m: Machine,
  iface: string,
  t: TunnelSpec,
  how: "init" | "by hand" = "init",
): Promise<void> {
  const path = join(m.root, "etc/wireguard", `${iface}.conf`);
  writeFileSync(path, tunnelConfig(t), { mode: 0o600 });
  if (m.systemd && how === "init") await m.must("systemctl", "enable", "--now", `wg-quick@${iface}`);
  else await m.must("wg-quick", "up", iface);
}

/** One ping answered, tried until `waitMs` has passed (a fresh tunnel handshakes first, a busy machine slowly). */
export async function pings(from: Machine, address: string, waitMs = EVENT_WAIT_MS): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  do {
    const r = await from.exec.run(["ping", "-c", "1", "-W", "1", address], { timeoutMs: 30_000 });
    if (r.code === 0) return true;
  } while (Date.now() < deadline);
  return false;
}

export async function isUp(m: Machine, iface: string): Promise<boolean> {
  return (await m.exec.run(["test", "-e", `/sys/class/net/${iface}`])).code === 0;
}

export async function mtuOf(m: Machine, iface: string): Promise<number> {
  return Number((await m.must("cat", `/sys/class/net/${iface}/mtu`)).trim());
}

/** The latest handshake any peer made with `iface`, in seconds since the epoch (0: none). */
export async function lastHandshake(m: Machine, iface: string): Promise<number> {
  const dump = await m.must("wg", "show", iface, "latest-handshakes");
  return Math.max(0, ...dump.split("\n").map((l) => Number(l.split("\t")[1]) || 0));
}

export async function unitState(m: Machine, unit: string): Promise<{ active: string; enabled: string }> {
  const active = (await m.exec.run(["systemctl", "is-active", unit])).stdout.trim();
  const enabled = (await m.exec.run(["systemctl", "is-enabled", unit])).stdout.trim();
  return { active, enabled };
}

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** The overlay on the portable floor: what these tests give the apply, each applier reaching out through `exec`. */
export function overlayHost(): Host {
  const appliers = appliersOf({ ...PORTABLE_APPLIERS, overlay: registered(overlayApplier) });
  return {
    kind: "arch",
    appliers,
    support: { supports: (type) => appliers.has(type), reason: "not implemented on the Arch host" },
  };
}

export interface OverlayNode {
  machine: Machine;
  stateDir: string;
  state: State;
  originals: StoreOriginals;
  ports: Omit<OverlayPorts, "originals">;
  apply(raw: unknown, opts?: { dryRun?: boolean }): Promise<ApplyResult>;
}

/** A node on machine `m` whose overlay key is `key` (as enrolment leaves it when it took a found tunnel). */
export function overlayNode(m: Machine, stateDir: string, key?: WgKey): OverlayNode {
  saveKeys(stateDir, makeKeys());
  if (key) saveKey(stateDir, "overlay", key.pair);
  const state = new State(stateDir);
  const host = overlayHost();
  const ports = { root: m.root, exec: m.exec, rootless: false, log: quiet, overlay: new OverlayState(state) };
  return {
    machine: m,
    stateDir,
    state,
    originals: new StoreOriginals(state),
    ports,
    apply: (raw, opts = {}) => applyRaw(raw, { host, state, ports, source: "link" }, opts.dryRun),
  };
}

export type { ExecResult };

/** The built executable run inside `node`'s machine (its network and mount namespaces) over the node's state. */
export function seaNode(node: OverlayNode): SeaMachine {
  const files = tempDir("mesh-wg-decl-");
  return seaMachine({
    exec: node.machine.exec,
    bin: ensureSea(),
    root: node.machine.root,
    state: node.stateDir,
    here: files,
    there: files,
  });
}
