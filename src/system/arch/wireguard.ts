// WireGuard as the machine has it, reached only through the command port: `wg show <if> dump`, the MTU the
// kernel reports, the `[Interface]` of a found configuration, and an interface brought up or down by the
// machine's init — `wg-quick@<if>` where systemd runs, `wg-quick` itself where it does not. Nothing here
// prints or logs a private key: the dump's first field is read and handed back, never put in a reason.
import {
  INTERFACE_POLL_MS,
  INTERFACE_SETTLE_MS,
  SECRET_FILE_MODE,
  STATE_DIR_MODE,
  WG_TIMEOUT_MS,
} from "../../defaults.ts";
import {
  configPath,
  type EnrolQuestion,
  isIP,
  type OverlayResource,
  oneLine,
  WIREGUARD_DIR,
} from "../../vocabulary/index.ts";
import type { Exec, ExecResult } from "../exec.ts";
import {
  type FoundFile,
  isActive,
  isEnabled,
  readRegular,
  showUnit,
  systemctl,
  type UnitState,
  writeRegular,
} from "./systemd.ts";
import { type FoundConfig, hostOf, parseConfig, rangeOf } from "./wireguard-config.ts";

// named in src/defaults.ts with every other timeout; said here too, so the driver's surface is unchanged
export { LOOK_AGAIN_MS } from "../../defaults.ts";
// the configuration as text is its own file; the driver's surface still carries it
export { type FoundConfig, hostOf, parseConfig, rangeOf, renderConfig } from "./wireguard-config.ts";

export { configPath, WIREGUARD_DIR };
export const quickUnit = (iface: string): string => `wg-quick@${iface}.service`;

export interface DumpPeer {
  publicKey: string;
  endpoint: string | null;
  allowedIps: string[];
  /** Seconds since the epoch of the last handshake with this interface; 0 when there has been none. */
  latestHandshake: number;
  keepalive: number;
}

/** `wg show <if> dump`: the interface line, then one line per peer. */
export interface Dump {
  privateKey: string;
  publicKey: string;
  port: number;
  peers: DumpPeer[];
}

/** What is at an interface name now: a WireGuard interface, nothing, something else, or `wg` could not say. */
export type Live =
  | { kind: "up"; dump: Dump }
  | { kind: "absent" }
  | { kind: "other" }
  | { kind: "unknown"; reason: string };

const none = (v: string | undefined) => (v === undefined || v === "(none)" ? null : v);

export function parseDump(text: string): Dump | null {
  const [head, ...rest] = text.split("\n").filter((l) => l.length > 0);
  const f = head?.split("\t");
  if (!f || f.length < 4) return null;
  const peers = rest.map((line) => {
    const p = line.split("\t");
    return {
      publicKey: p[0] ?? "",
      endpoint: none(p[2]),
      allowedIps: none(p[3])?.split(",") ?? [],
      latestHandshake: Number(p[4]) || 0,
      keepalive: p[7] === "off" ? 0 : Number(p[7]) || 0,
    };
  });
  return { privateKey: none(f[0]) ?? "", publicKey: none(f[1]) ?? "", port: Number(f[2]) || 0, peers };
}

/** A command's own last words, without wg-quick's echo of each step and wireguard-go's banner. */
export function commandFailure(r: ExecResult): string {
  if (r.spawnError) return `could not start: ${r.spawnError}`;
  if (r.timedOut) return "timed out";
  const said = r.stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("[#]") && !/^[│┌└─]/.test(l) && !/^Warning:/.test(l));
  const how = r.code === null ? `killed by ${r.signal}` : `exit ${r.code}`;
  return said.length ? `${oneLine(said.slice(-2).join("; "))} (${how})` : how;
}

export async function interfaceExists(exec: Exec, iface: string): Promise<boolean> {
  const r = await exec.run(["test", "-e", `/sys/class/net/${iface}`], { timeoutMs: WG_TIMEOUT_MS });
  return r.code === 0;
}

/** The interface as `wg` sees it. The dump's private key stays in the value; no reason ever quotes stdout. */
export async function readInterface(exec: Exec, iface: string): Promise<Live> {
  if (!(await interfaceExists(exec, iface))) return { kind: "absent" };
  const r = await exec.run(["wg", "show", iface, "dump"], { timeoutMs: WG_TIMEOUT_MS });
  if (r.spawnError) return { kind: "unknown", reason: `wg is not installed (${r.spawnError})` };
  if (r.code !== 0) {
    if (/Protocol not supported|No such device|not a WireGuard/i.test(r.stderr)) return { kind: "other" };
    return {
      kind: "unknown",
      reason: `wg show ${iface} did not answer: ${oneLine(r.stderr) || `exit ${r.code}`}`,
    };
  }
  const dump = parseDump(r.stdout);
  return dump
    ? { kind: "up", dump }
    : { kind: "unknown", reason: `wg show ${iface} dump gave no interface line` };
}

/** The MTU the kernel has for the interface now, or null. */
export async function interfaceMtu(exec: Exec, iface: string): Promise<number | null> {
  const r = await exec.run(["cat", `/sys/class/net/${iface}/mtu`], { timeoutMs: WG_TIMEOUT_MS });
  const n = Number.parseInt(r.stdout.trim(), 10);
  return r.code === 0 && Number.isFinite(n) ? n : null;
}

/** The WireGuard interfaces up now (kernel or userspace), or why `wg` could not say. */
export async function wireguardInterfaces(exec: Exec): Promise<string[] | string> {
  const r = await exec.run(["wg", "show", "interfaces"], { timeoutMs: WG_TIMEOUT_MS });
  if (r.spawnError) return `wg is not installed (${r.spawnError})`;
  if (r.code !== 0) return `wg show interfaces: ${commandFailure(r)}`;
  const names = r.stdout.split(/\s+/).filter(Boolean);
  // a userspace socket can outlive its interface: only what the kernel has is up
  const up = await Promise.all(names.map((n) => interfaceExists(exec, n)));
  return names.filter((_, i) => up[i]);
}

/** The addresses the kernel has on the interface ("10.8.0.1/24"), for a tunnel with no configuration. */
export async function liveAddresses(exec: Exec, iface: string): Promise<string[]> {
  const r = await exec.run(["ip", "-o", "addr", "show", "dev", iface], { timeoutMs: WG_TIMEOUT_MS });
  if (r.code !== 0) return [];
  return [...r.stdout.matchAll(/\binet6? ([0-9a-f.:]+\/[0-9]+) scope global/g)].map((m) => m[1]!);
}

/** sd_booted(): systemd is this machine's init when /run/systemd/system exists. */
export async function hasSystemd(exec: Exec): Promise<boolean> {
  const r = await exec.run(["test", "-d", "/run/systemd/system"], { timeoutMs: WG_TIMEOUT_MS });
  return r.code === 0;
}

/** Why the running interface is not what `wanted` declares (its key, port, peers), or null when it is. */
export function liveDifference(wanted: OverlayResource, publicKey: string, dump: Dump): string | null {
  if (dump.publicKey !== publicKey) return "runs another key";
  if (wanted.listen_port !== undefined && dump.port !== wanted.listen_port)
    return `listens on ${dump.port}, not ${wanted.listen_port}`;
  if (dump.peers.length !== wanted.peers.length)
    return `has ${dump.peers.length} peer(s), not ${wanted.peers.length}`;
  const live = new Map(dump.peers.map((p) => [p.publicKey, p]));
  for (const p of wanted.peers) {
    const l = live.get(p.public_key);
    if (!l) return `lacks peer ${p.public_key.slice(0, 8)}…`;
    const sameIps = [...l.allowedIps].sort().join(",") === [...p.allowed_ips].sort().join(",");
    if (!sameIps) return `routes ${l.allowedIps.join(", ")} to peer ${p.public_key.slice(0, 8)}…`;
    if ((p.keepalive_s ?? 0) !== l.keepalive)
      return `keeps peer ${p.public_key.slice(0, 8)}… alive differently`;
    // an endpoint given as a name is resolved by wg; only a literal one can be compared
    const host = p.endpoint?.replace(/^\[|\]?:[0-9]+$/g, "");
    if (p.endpoint && host && isIP(host) && l.endpoint === null)
      return `has no endpoint for peer ${p.public_key.slice(0, 8)}…`;
  }
  return null;
}

/** How an interface is run here: by systemd's wg-quick@ unit, or by wg-quick itself. */
export interface Init {
  systemd: boolean;
  exec: Exec;
}

/** What wg-quick@<if> is now (systemd only), or why it could not be asked. */
export async function quickUnitState(init: Init, iface: string): Promise<UnitState | string> {
  return showUnit(init.exec, quickUnit(iface));
}

export const unitRunning = (s: UnitState): boolean => isActive(s.active);
export const unitEnabled = (s: UnitState): boolean => isEnabled(s.file);

async function wgQuick(exec: Exec, verb: "up" | "down", iface: string): Promise<string | null> {
  const r = await exec.run(["wg-quick", verb, iface], { timeoutMs: WG_TIMEOUT_MS });
  return r.code === 0 ? null : `wg-quick ${verb} ${iface}: ${commandFailure(r)}`;
}

/** Bring the interface up (again, when `restart`), enabled at boot where systemd runs; null or why not. */
export async function bringUp(init: Init, iface: string, restart: boolean): Promise<string | null> {
  if (init.systemd) {
    const enabled = await systemctl(init.exec, "enable", "--quiet", quickUnit(iface));
    if (enabled) return enabled;
    return systemctl(init.exec, restart ? "restart" : "start", quickUnit(iface));
  }
  if (restart && (await interfaceExists(init.exec, iface))) {
    const down = await wgQuick(init.exec, "down", iface);
    if (down) return down;
  }
  return wgQuick(init.exec, "up", iface);
}

/** Take the interface down, and where systemd runs, stop its unit starting at boot; null or why not. */
export async function bringDown(init: Init, iface: string, disable = true): Promise<string | null> {
  if (init.systemd) {
    const stopped = await systemctl(init.exec, "stop", quickUnit(iface));
    if (stopped) return stopped;
    return disable ? systemctl(init.exec, "disable", "--quiet", quickUnit(iface)) : null;
  }
  if (!(await interfaceExists(init.exec, iface))) return null;
  return wgQuick(init.exec, "down", iface);
}

/** Start a unit again as it was found: enabled if it was, started if it was running. */
export async function putBack(
  init: Init,
  iface: string,
  found: { enabled: boolean; running: boolean },
): Promise<string | null> {
  if (init.systemd) {
    if (found.enabled) {
      const e = await systemctl(init.exec, "enable", "--quiet", quickUnit(iface));
      if (e) return e;
    }
    if (!found.running || (await interfaceExists(init.exec, iface))) return null;
    // a unit that failed to stop is "failed"; start needs it reset first
    await systemctl(init.exec, "reset-failed", quickUnit(iface));
    return systemctl(init.exec, "start", quickUnit(iface));
  }
  if (!found.running || (await interfaceExists(init.exec, iface))) return null;
  return wgQuick(init.exec, "up", iface);
}

/** Wait until the interface is gone (true) or still there after `ms` (false). */
export async function waitGone(exec: Exec, iface: string, ms = INTERFACE_SETTLE_MS): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if (!(await interfaceExists(exec, iface))) return true;
    if (Date.now() > until) return false;
    await sleep(INTERFACE_POLL_MS);
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Wait until `wg` answers for the interface (true) or `ms` passed (false). */
export async function waitUp(exec: Exec, iface: string, ms = INTERFACE_SETTLE_MS): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if ((await readInterface(exec, iface)).kind === "up") return true;
    if (Date.now() > until) return false;
    await sleep(INTERFACE_POLL_MS);
  }
}

/** Write the mesh's config 0600; wg-quick's directory holds keys, so it is made 0700 when the mesh makes it. */
export async function writeConfig(root: string, path: string, bytes: Uint8Array): Promise<void> {
  await writeRegular(root, path, bytes, SECRET_FILE_MODE, undefined, STATE_DIR_MODE);
}

/** The interface as declared, read back: its key, port and peers from wg, its MTU from the kernel; null when right. */
export async function readBack(
  exec: Exec,
  wanted: OverlayResource,
  publicKey: string,
): Promise<string | null> {
  await waitUp(exec, wanted.interface);
  const live = await readInterface(exec, wanted.interface);
  if (live.kind !== "up")
    return live.kind === "unknown" ? live.reason : `${wanted.interface} is not up after it was started`;
  const diff = liveDifference(wanted, publicKey, live.dump);
  if (diff) return `${wanted.interface} ${diff}`;
  if (wanted.mtu !== undefined) {
    const mtu = await interfaceMtu(exec, wanted.interface);
    if (mtu !== wanted.mtu) return `${wanted.interface} runs at MTU ${mtu}, not ${wanted.mtu}`;
  }
  return null;
}

/** What the running interface is, in the words a report uses. */
export async function describeLive(exec: Exec, iface: string): Promise<string> {
  const live = await readInterface(exec, iface);
  if (live.kind !== "up") return `read back: ${iface} is not up`;
  const mtu = await interfaceMtu(exec, iface);
  return `read back: port ${live.dump.port}, ${live.dump.peers.length} peer(s), MTU ${mtu}`;
}

/** What the enrolment question and a rekey carry of a found tunnel (protocol.md). */
export type TunnelFacts = NonNullable<EnrolQuestion["tunnel"]>;

/** A tunnel found up on the machine: its facts, its configuration if it has one, and its private key. */
export interface FoundTunnel {
  tunnel: TunnelFacts;
  /** The running interface's private key (standard base64): only ever saved as the overlay key or compared. */
  privateKey: string;
  publicKey: string;
  /** `<wireguard dir>/<if>.conf` as found, or null when the interface has none (raised by hand). */
  config: FoundFile | null;
  parsed: FoundConfig | null;
  dump: Dump;
}

/** The found tunnel `iface`: port and peers from `wg`, address and MTU from its `[Interface]`. */
export async function readTunnel(exec: Exec, root: string, iface: string): Promise<FoundTunnel | string> {
  const live = await readInterface(exec, iface);
  if (live.kind === "absent") return `no interface ${iface} is up`;
  if (live.kind === "other") return `${iface} is not a WireGuard interface`;
  if (live.kind === "unknown") return live.reason;
  const file = await readRegular(root, configPath(iface));
  if (typeof file === "string") return file;
  const parsed = file ? parseConfig(Buffer.from(file.bytes).toString("utf8")) : null;
  const addresses = parsed?.addresses.length ? parsed.addresses : await liveAddresses(exec, iface);
  const address = addresses.find((a) => isIP(hostOf(a)) === 4) ?? addresses[0] ?? "";
  if (!live.dump.privateKey) return `${iface} has no private key set`;
  return {
    tunnel: {
      interface: iface,
      port: live.dump.port,
      address: address ? hostOf(address) : "",
      range: address ? rangeOf(address) : "",
      peers: live.dump.peers.length,
      mtu: parsed?.mtu ?? 0,
    },
    privateKey: live.dump.privateKey,
    publicKey: live.dump.publicKey,
    config: file,
    parsed,
    dump: live.dump,
  };
}

export type Found =
  | { kind: "none" }
  | { kind: "one"; found: FoundTunnel }
  | { kind: "many"; interfaces: string[] }
  | { kind: "unknown"; reason: string };

/** Exactly one WireGuard interface up besides the mesh's own is a tunnel to take (overlay.md); any other count is not. */
export async function findTunnel(exec: Exec, root: string, mesh: ReadonlySet<string>): Promise<Found> {
  const names = await wireguardInterfaces(exec);
  if (typeof names === "string") return { kind: "unknown", reason: names };
  const others = names.filter((n) => !mesh.has(n));
  if (others.length === 0) return { kind: "none" };
  if (others.length > 1) return { kind: "many", interfaces: others };
  const found = await readTunnel(exec, root, others[0]!);
  return typeof found === "string" ? { kind: "unknown", reason: found } : { kind: "one", found };
}
