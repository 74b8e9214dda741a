// What `node add` and `node rm` cost at N nodes against what they cost at 10, measured so that the machine's load
// falls on both alike: a companion mesh of the same shape holding 10 nodes is raised beside the fleet's, and the
// two are asked in turns. Timed twice: through the executable (what an operator waits for, a process started
// each time) and the command's own function in this process (addNode, removeNode: the bus's part alone). And the
// `rm` of an enrolled node with its link up (a simulated one): its revocation is its account's claims pushed again,
// which the server applies by walking that account's clients — a shard's, at N (accounts.ts).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { revokeOnBus } from "../../src/mesh/claims.ts";
import {
  addNode,
  MeshDir,
  openState,
  removeNode,
  revocationsOnBus,
  revokesOf,
} from "../../src/mesh/index.ts";
import { freePortPairs, mesh } from "../../test/mesh/operator.ts";
import type { Running } from "../../test/support/cli.ts";
import { raise, say, until } from "./fleet-mesh.ts";
import { SimNode } from "./sim-node.ts";
import { formatMs, formatRatio, percentile } from "./stats.ts";

const TRIES = 5;

interface Costs {
  cliAdd: number[];
  cliRm: number[];
  fnAdd: number[];
  fnRm: number[];
  /** removeNode of an enrolled node, linked. */
  linkedRm: number[];
  /** The revocation alone of a node never enrolled (its code's enrolling user, ENROL's claims pushed again). */
  fnRevoke: number[];
}

const empty = (): Costs => ({ cliAdd: [], cliRm: [], fnAdd: [], fnRm: [], linkedRm: [], fnRevoke: [] });

/** The revocation `node rm` makes of a node never enrolled, timed alone; then the node removed. */
async function revokeAlone(meshDir: MeshDir, c: Costs): Promise<void> {
  await addNode(meshDir, "probe-rv");
  const state = await openState(meshDir);
  try {
    const record = (await state.nodes.get("probe-rv"))!.value;
    const code = (await state.codes.get("probe-rv"))?.value ?? null;
    await timed(c.fnRevoke, () => revokeOnBus(meshDir, revokesOf(record, code)));
  } finally {
    await state.bus.close();
  }
  await removeNode(meshDir, "probe-rv");
}

/** How many users ENROL's claims revoke now (one entry, "*", stands for every user issued up to its second). */
async function enrolRevoked(dir: string): Promise<number> {
  return Object.keys((await revocationsOnBus(new MeshDir(dir), "ENROL")).users).length;
}

async function timed(into: number[], work: () => Promise<unknown>): Promise<void> {
  const start = performance.now();
  await work();
  into.push(performance.now() - start);
}

async function cli(dir: string, args: string[]): Promise<void> {
  const r = await mesh(dir, args);
  if (r.code !== 0) throw new Error(`mesh ${args.join(" ")}: ${r.stderr.trim()}`);
}

/** One add and one rm each way, of names no fleet holds. */
async function once(dir: string, c: Costs): Promise<void> {
  const meshDir = new MeshDir(dir);
  await timed(c.cliAdd, () => cli(dir, ["node", "add", "probe"]));
  await timed(c.cliRm, () => cli(dir, ["node", "rm", "probe"]));
  await timed(c.fnAdd, () => addNode(meshDir, "probe-fn"));
  await timed(c.fnRm, () => removeNode(meshDir, "probe-fn"));
  await revokeAlone(meshDir, c);
  const linked = await SimNode.enrol(await addNode(meshDir, "probe-on"));
  linked.start({ heartbeatS: 30 });
  try {
    await until(() => linked.linkedAt > 0, "the enrolled probe linked");
    await timed(c.linkedRm, () => removeNode(meshDir, "probe-on"));
  } finally {
    await linked.stop();
  }
}

/** A mesh of `servers` servers and 10 nodes added, under `base`. */
async function companion(base: string, servers: number): Promise<{ dir: string; ups: Map<number, Running> }> {
  const dir = join(base, "ten");
  mkdirSync(base, { recursive: true });
  const ports = await freePortPairs(servers);
  await cli(dir, ["init", ...ports.flatMap((p) => ["--server", `127.0.0.1:${p}`])]);
  const ups = await raise(dir, servers);
  for (let i = 1; i <= 10; i++) await addNode(new MeshDir(dir), `t${i}`);
  return { dir, ups };
}

const line = (what: string, big: number[], ten: number[]) =>
  `${what} ${formatMs(percentile(big, 50))} against ${formatMs(percentile(ten, 50))} (${formatRatio(percentile(big, 50), percentile(ten, 50))})`;

/** `node add`/`rm` at N (the fleet's mesh, `dir`) against at 10 (a companion mesh), in turns; printed. */
export async function addCostAgainstTen(
  dir: string,
  base: string,
  servers: number,
  n: number,
): Promise<void> {
  const small = await companion(base, servers);
  try {
    const held = [await enrolRevoked(dir), await enrolRevoked(small.dir)];
    const big = empty();
    const ten = empty();
    for (let i = 0; i < TRIES; i++)
      for (const [d, c] of i % 2
        ? [[dir, big] as const, [small.dir, ten] as const]
        : [[small.dir, ten] as const, [dir, big] as const])
        await once(d, c);
    say(
      `node add / node rm at ${n} nodes against at 10 (a mesh of 10 beside it, asked in turns, median of ${TRIES}): ${line("executable add", big.cliAdd, ten.cliAdd)}, ${line("rm", big.cliRm, ten.cliRm)}; the function alone: ${line("add", big.fnAdd, ten.fnAdd)}, ${line("rm", big.fnRm, ten.fnRm)}; an enrolled node's rm, its link up, the function: ${line("", big.linkedRm, ten.linkedRm).trim()}; a never-enrolled node's revocation alone (ENROL's claims pushed again: ${held[0]} entries at ${n}, ${held[1]} at 10, before): ${line("", big.fnRevoke, ten.fnRevoke).trim()}`,
    );
  } finally {
    await Promise.all([...small.ups.values()].map((u) => u.stop()));
  }
}
