// Which long-lived processes a test run left running. A run is named by MESH_TEST_RUN in the environment of
// everything it starts (set by .ci/run, or by vitest's global setup when run alone), so its processes are told
// from another run's on the same machine even after their parents are gone. No vitest import: .ci/run and
// scripts/strays.ts use this too.
import { readdirSync, readFileSync } from "node:fs";

export const RUN_MARKER = "MESH_TEST_RUN";
/** How long what the last test stopped may take to be gone: its end, not a pace (a SIGKILL is quick). */
export const GONE_WAIT_MS = 30_000;

/** The kinds of process a test may start and must end: a host, a bus, a container runtime, a tunnel, a machine. */
const LONG_LIVED =
  /(?:cli\/main\.ts|mesh-chaos-bin-[^/ ]+\/main\.cjs|mesh-host[^/ ]*)(?: |$)|nats-server|dockerd|containerd|podman|conmon|aardvark-dns|wireguard-go|systemd-nspawn/;

export interface Stray {
  pid: number;
  /** Its process group: the unit a test starts and ends. */
  pgid: number;
  args: string;
}

/** This run's marker as an environment to pass where a command's environment is built from nothing. */
export function runMarkerEnv(): Record<string, string> {
  const run = process.env[RUN_MARKER];
  return run ? { [RUN_MARKER]: run } : {};
}

/** The processes of the long-lived kinds whose environment names `run`, this process and its ancestors aside. */
export function straysOf(run: string): Stray[] {
  const mine = `${RUN_MARKER}=${run}`;
  const out: Stray[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim();
      if (!LONG_LIVED.test(args)) continue;
      if (!readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(mine)) continue;
      out.push({ pid: Number(entry), pgid: pgidOf(entry), args: args.slice(0, 200) });
    } catch {
      // gone meanwhile, or a kernel thread
    }
  }
  return out;
}

/** The strays of `run` still there after `waitMs`: what a test just stopped is given that long to be gone. */
export async function lingering(run: string, waitMs: number): Promise<Stray[]> {
  const deadline = Date.now() + waitMs;
  let strays = straysOf(run);
  while (strays.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    strays = straysOf(run);
  }
  return strays;
}

/** SIGKILL each stray's group, and the stray itself should it share a group with something else. */
export function killStrays(strays: Stray[]): void {
  for (const s of strays)
    for (const target of s.pgid === s.pid ? [-s.pgid] : [s.pid]) {
      try {
        process.kill(target, "SIGKILL");
      } catch {
        // gone already
      }
    }
}

export function describeStrays(strays: Stray[]): string {
  return strays.map((s) => `  pid ${s.pid} (group ${s.pgid}): ${s.args}`).join("\n");
}

function pgidOf(pid: string): number {
  // /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
}
