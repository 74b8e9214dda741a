// Ports for the servers tests and benches start. They are found free, then bound by a server seconds later; in
// between, a port in the kernel's ephemeral range can be taken as the local port of any outgoing connection on the
// machine (a clean-clone run lost a cluster test so: "bind: address already in use"). So ports are chosen below that
// range, and each vitest worker takes its own slice of it, so two workers never hand out the same one.
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

const LOWEST = 10_000;
/** Linux's default start of the ephemeral range, when /proc cannot say. */
const EPHEMERAL_FROM = 32_768;
/** Slice 0 for a process outside vitest (the demo, the benches), one each for up to this many workers after it. */
const WORKER_SLICES = 8;
/** Ports handed out here are kept this far apart: a server's route listens on the port after its own. */
const APART = 3;

const handedOut = new Set<number>();

function ephemeralFrom(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > LOWEST + 1_000 ? low : EPHEMERAL_FROM;
  } catch {
    return EPHEMERAL_FROM;
  }
}

/** This process's slice of the ports below the ephemeral range: [from, to). */
function slice(): { from: number; to: number } {
  const id = Number(process.env.VITEST_POOL_ID);
  const index = Number.isInteger(id) && id > 0 ? ((id - 1) % WORKER_SLICES) + 1 : 0;
  const size = Math.floor((ephemeralFrom() - 2 - LOWEST) / (WORKER_SLICES + 1));
  return { from: LOWEST + index * size, to: LOWEST + (index + 1) * size - 1 };
}

async function listenable(port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

async function freeRun(length: number): Promise<number> {
  const { from, to } = slice();
  for (;;) {
    const p = from + Math.floor(Math.random() * (to - from - length));
    if ([...handedOut].some((q) => Math.abs(q - p) < APART + length)) continue;
    let free = true;
    for (let i = 0; i < length && free; i++) free = await listenable(p + i);
    if (!free) continue;
    handedOut.add(p);
    return p;
  }
}

/** One free port. */
export async function freePort(): Promise<number> {
  return await freeRun(1);
}

/** `n` ports, each with the next one free as well (the routes listen there), none near another. */
export async function freePortPairs(n: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < n) ports.push(await freeRun(2));
  return ports;
}
