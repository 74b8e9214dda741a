// `npm run bench:fleet -- --upgrade [--nodes N]` (default 20): a fleet upgraded from the mesh's releases. One
// server under `mesh up`; N nodes, each with its own copy of the executable installed, enrolled, and run by the
// real launcher in a restart loop (systemd's part). A release (the executable with a digest of its own) is stored
// with `mesh release add` and named by `mesh push --all`; measured and printed:
//   fleet      from the push to every node running the new release, confirmed (p50 and the last node)
//   bytes      what the bus carried while it happened: the nats-server process's written bytes (/proc/<pid>/io
//              wchar: its sockets, nothing written to its store but acks), beside N × the stored release
// Everything runs under one temporary directory and is stopped at the end.
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { freePortPairs, initMesh, mesh, meshUp } from "../../test/mesh/operator.ts";
import { type Running, runCli } from "../../test/support/cli.ts";
import { RestartLoop } from "../../test/support/restart-loop.ts";
import { ensureSea, seaVariant } from "../../test/support/sea.ts";
import { formatMs, percentile } from "./stats.ts";

const WAIT_MS = 20 * 60_000;
const sha = (f: string) => createHash("sha256").update(readFileSync(f)).digest("hex");
const say = (line: string) => process.stdout.write(`${line}\n`);
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/** Bytes the process has written (sockets and files alike), from /proc/<pid>/io. */
function written(pid: number): number {
  const line = readFileSync(`/proc/${pid}/io`, "utf8").match(/^wchar: (\d+)$/m);
  return line ? Number(line[1]) : Number.NaN;
}

interface Node {
  name: string;
  state: string;
  loop: RestartLoop;
}

async function node(base: string, dir: string, name: string): Promise<Node> {
  const added = await mesh(dir, ["node", "add", name]);
  if (added.code !== 0) throw new Error(`node add ${name}: ${added.stderr}`);
  const bin = join(base, name, "usr/bin/mesh-host");
  const state = join(base, name, "state");
  const root = join(base, name, "root");
  mkdirSync(dirname(bin), { recursive: true });
  mkdirSync(root, { recursive: true });
  copyFileSync(ensureSea(), bin);
  chmodSync(bin, 0o755);
  const enrol = await runCli(["enrol", "--state", state, "--root", root], { input: added.stdout });
  if (enrol.code !== 0) throw new Error(`enrol ${name}: ${enrol.stderr}`);
  const loop = new RestartLoop(bin, state, root, ["--heartbeat-s", "5", "--drift-s", "3600"]);
  return { name, state, loop };
}

const confirmed = (n: Node) => readFileSync(join(n.state, "confirmed"), { flag: "a+" }).toString().trim();

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${WAIT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function upgradeBench(n: number): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "bench-upgrade-"));
  const dir = join(base, "mesh");
  const nodes: Node[] = [];
  let up: Running | null = null;
  let failed = true;
  try {
    await initMesh(dir, await freePortPairs(1));
    up = await meshUp(dir);
    for (let i = 1; i <= n; i++) nodes.push(await node(base, dir, `u${String(i).padStart(3, "0")}`));
    const v1 = sha(ensureSea());
    await until(() => nodes.every((x) => confirmed(x) === v1), "node confirmed on the installed release");
    const next = seaVariant(join(base, "mesh-host-0.2.0-linux-x64"), "bench");
    const added = await mesh(dir, ["release", "add", next]);
    if (added.code !== 0) throw new Error(`release add: ${added.stderr}`);
    const [row] = JSON.parse((await mesh(dir, ["release", "ls", "--json"])).stdout).releases;
    const file = join(base, "decl.json");
    const resources = [{ id: "motd", type: "file", path: "/etc/motd", content: "upgraded\n" }];
    writeFileSync(file, JSON.stringify({ v: 1, mode: "converged", host: { release: "0.2.0" }, resources }));
    const server = Number(readFileSync(join(dir, "servers/1/server.pid"), "utf8"));
    const before = written(server);
    const start = Date.now();
    const pushed = await mesh(dir, ["push", "--all", file, "--wait-s", "0"]);
    if (pushed.code !== 0) throw new Error(`push: ${pushed.stderr}`);
    const v2 = sha(next);
    const at = new Map<string, number>();
    await until(() => {
      for (const x of nodes) if (!at.has(x.name) && confirmed(x) === v2) at.set(x.name, Date.now() - start);
      return at.size === n;
    }, "node on the new release");
    const carried = written(server) - before;
    const times = [...at.values()];
    say(`# bench:fleet --upgrade — ${new Date().toISOString().slice(0, 10)}, ${n} nodes, one server`);
    say(`release: ${mib(row.manifest.size)}, stored ${row.manifest.encoding} ${mib(row.stored)}`);
    say(
      `push → every node on the new release, confirmed: p50 ${formatMs(percentile(times, 50))}, all ${formatMs(Math.max(...times))}`,
    );
    say(
      `bus carried ${mib(carried)} (nats-server's writes), ${mib(carried / n)} a node; ${n} × the stored release is ${mib(n * row.stored)}`,
    );
    failed = false;
  } finally {
    await Promise.all(nodes.map((x) => x.loop.stop()));
    await up?.stop();
    if (failed) process.stderr.write(`bench:fleet --upgrade: kept ${base} for its logs\n`);
    else rmSync(base, { recursive: true, force: true });
  }
}
