// Machines for the mesh's multi-machine tests: each a network namespace with one address on a shared LAN
// (a bridge in a namespace of its own, joined by a veth pair a machine), and the built executable run inside
// it through a one-line wrapper — so `mesh up`, a node and an operator each see only their own network, as on
// separate hosts. Only the addresses given here are used; every namespace and process goes at `stop`.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

let counter = 0;
/** Names in the host's namespace are this process's own, so test files running side by side never meet. */
const unique = (prefix: string) => `${prefix}${process.pid % 100000}${(counter++).toString(36)}`;

function ip(...argv: string[]): void {
  const r = spawnSync("ip", argv, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${argv.join(" ")}: ${r.stderr.trim()}`);
}

export interface NetMachine {
  name: string;
  address: string;
  /** A path to give as MESH_HOST_BIN: the executable, run inside this machine's namespace. */
  bin: string;
}

export interface Lan {
  machines: NetMachine[];
  stop(): void;
}

/** `n` machines on 10.79.<net>.1 … n, each its own network namespace; `bin` is the executable they run. */
export function lan(n: number, net: number, bin: string): Lan {
  const base = mkdtempSync(join(tmpdir(), "mesh-lan-"));
  const sw = unique("mhsw");
  const names: string[] = [sw];
  const stop = () => {
    for (const ns of names) {
      const pids = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).stdout.split(/\s+/);
      for (const p of pids.filter(Boolean))
        try {
          process.kill(Number(p), "SIGKILL");
        } catch {
          // already gone
        }
      spawnSync("ip", ["netns", "del", ns]);
    }
    rmSync(base, { recursive: true, force: true });
  };
  process.once("exit", stop);
  try {
    ip("netns", "add", sw);
    ip("-n", sw, "link", "add", "br0", "type", "bridge");
    ip("-n", sw, "link", "set", "br0", "up");
    const machines = Array.from({ length: n }, (_, j) => {
      const name = unique("mhm");
      names.push(name);
      ip("netns", "add", name);
      ip("-n", name, "link", "set", "lo", "up");
      const [inner, outer] = [unique("vi"), unique("vo")];
      ip("link", "add", inner, "type", "veth", "peer", "name", outer);
      ip("link", "set", inner, "netns", name);
      ip("link", "set", outer, "netns", sw);
      ip("-n", sw, "link", "set", outer, "master", "br0");
      ip("-n", sw, "link", "set", outer, "up");
      const address = `10.79.${net}.${j + 1}`;
      ip("-n", name, "addr", "add", `${address}/24`, "dev", inner);
      ip("-n", name, "link", "set", inner, "up");
      const wrapper = join(base, `${name}.sh`);
      writeFileSync(wrapper, `#!/bin/sh\nexec ip netns exec ${name} ${JSON.stringify(bin)} "$@"\n`);
      chmodSync(wrapper, 0o755);
      return { name, address, bin: wrapper };
    });
    return { machines, stop };
  } catch (e) {
    stop();
    throw e;
  }
}

/** Run `start` with MESH_HOST_BIN set to `m`'s wrapper: what it spawns runs inside that machine. */
export function on<T>(m: NetMachine, start: () => T): T {
  const was = process.env.MESH_HOST_BIN;
  process.env.MESH_HOST_BIN = m.bin;
  try {
    return start();
  } finally {
    process.env.MESH_HOST_BIN = was;
  }
}

/** The address (of `peers`) the process `pid` in machine `m` holds a TCP connection to, or null. */
export function peerOf(m: NetMachine, pid: number, peers: string[]): string | null {
  const ss = spawnSync("ip", ["netns", "exec", m.name, "ss", "-Htnp", "state", "established"], {
    encoding: "utf8",
  });
  for (const line of ss.stdout.split("\n")) {
    if (!line.includes(`pid=${pid},`)) continue;
    const peer = (line.trim().split(/\s+/)[3] ?? "").replace(/:\d+$/, "");
    if (peers.includes(peer)) return peer;
  }
  return null;
}
