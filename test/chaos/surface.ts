// Scenario 6, surface: while `run` holds a link the process listens on no TCP or UDP port and no unix socket,
// and holds exactly one outbound connection, to the server. Read from /proc/<pid>/fd and /proc/<pid>/net.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import type { MeshDouble } from "../mesh/index.ts";
import { BusNode, permissionProblems, until, withMesh } from "./bus.ts";
import { busDeclaration } from "./bus-faults.ts";
import { type Outcome, type RunOptions, type Scenario, Tally } from "./support.ts";

/** The inodes of every socket the process holds open. */
function socketInodes(pid: number): Set<string> {
  const out = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) out.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

function table(pid: number, name: string): string[][] {
  try {
    return readFileSync(`/proc/${pid}/net/${name}`, "utf8")
      .trim()
      .split("\n")
      .slice(1)
      .map((l) => l.trim().split(/\s+/));
  } catch {
    return [];
  }
}

const portOf = (address: string) => Number.parseInt(address.split(":")[1] ?? "0", 16);

export interface Surface {
  listening: string[];
  outbound: { remotePort: number }[];
}

/** What the process exposes: its listening sockets (any kind) and its established TCP connections. */
export function surfaceOf(pid: number): Surface {
  const mine = socketInodes(pid);
  const listening: string[] = [];
  const outbound: { remotePort: number }[] = [];
  for (const name of ["tcp", "tcp6"])
    for (const row of table(pid, name)) {
      if (!mine.has(row[9] ?? "")) continue;
      if (row[3] === "0A") listening.push(`${name} port ${portOf(row[1]!)}`);
      if (row[3] === "01") outbound.push({ remotePort: portOf(row[2]!) });
    }
  for (const name of ["udp", "udp6", "raw", "raw6"])
    for (const row of table(pid, name))
      if (mine.has(row[9] ?? "")) listening.push(`${name} port ${portOf(row[1]!)}`);
  for (const row of table(pid, "unix"))
    if (mine.has(row[6] ?? "") && (Number.parseInt(row[3] ?? "0", 16) & 0x10000) !== 0)
      listening.push(`unix ${row[7] ?? "(unnamed)"}`);
  return { listening, outbound };
}

/** Two heartbeats more than now: the node holds a link (its dial, and the preflight before it, are over). */
async function heartbeatsArrive(mesh: MeshDouble, node: BusNode, when: string): Promise<string[]> {
  const beats = mesh.heartbeats.length;
  return (await until(() => mesh.heartbeats.length >= beats + 2))
    ? []
    : [`${when}: no two heartbeats arrived: ${node.runTail()}`];
}

/**
 * The surface once a dial's leftovers are gone: a socket the preflight or the dead link closed leaves the
 * process's tables when the kernel has done with it, so a second connection is a problem only if it stays.
 */
async function surfaceSettles(node: BusNode, mesh: MeshDouble, when: string): Promise<string[]> {
  // a listening socket is one whenever it is seen, however briefly
  const listened = new Set<string>();
  const now = () => {
    const problems = surfaceProblems(node, mesh, when);
    for (const p of problems) if (p.includes(": listens on ")) listened.add(p);
    return problems;
  };
  await until(() => now().length === 0);
  return [...listened, ...now().filter((p) => !listened.has(p))];
}

function surfaceProblems(node: BusNode, mesh: MeshDouble, when: string): string[] {
  const pid = node.host?.pid;
  if (!pid || node.host?.child.exitCode !== null) return [`${when}: run is not running`];
  const { listening, outbound } = surfaceOf(pid);
  const problems = listening.map((l) => `${when}: listens on ${l}`);
  const port = Number(new URL(mesh.url).port);
  if (outbound.length !== 1 || outbound[0]!.remotePort !== port)
    problems.push(
      `${when}: ${outbound.length} outbound connections (to ${outbound.map((o) => o.remotePort).join(", ") || "nothing"}), not one to the server's ${port}`,
    );
  return problems;
}

export const surface: Scenario = {
  key: "surface",
  title: "6 surface (no listening socket, one connection)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 3 : 1;
    await withMesh(async (mesh) => {
      const node = await BusNode.enrolled(mesh, "surface");
      try {
        await node.start();
        for (let n = 0; n < rounds; n++) {
          await tally.try(`round ${n}: idle, holding the link`, async () => [
            ...(await heartbeatsArrive(mesh, node, "idle")),
            ...(await surfaceSettles(node, mesh, "idle")),
          ]);
          const tag = `surface-${n}`;
          await mesh.declare(node.name, busDeclaration(node, tag, true));
          await tally.try(`round ${n}: mid-apply`, async () =>
            (await until(() => node.fileText("/srv/bus/f9") === `${tag} 9\n`))
              ? surfaceProblems(node, mesh, "mid-apply")
              : [`the node never started applying ${tag}: ${node.runTail()}`],
          );
          node.release(tag);
          await mesh.restartServer();
          await tally.try(`round ${n}: after the server restarted and the node dialled again`, async () => [
            ...(await heartbeatsArrive(mesh, node, "after the restart")),
            ...(await surfaceSettles(node, mesh, "after a redial")),
          ]);
          opts.progress?.(`surface ${n + 1}/${rounds}`);
        }
        await tally.try("the node's server user held exactly protocol.md's permissions", () =>
          permissionProblems(mesh, node.name),
        );
        await tally.try("after SIGTERM: exit 0", () => node.stop());
      } finally {
        await node.kill();
      }
    });
    return tally.outcome();
  },
};
