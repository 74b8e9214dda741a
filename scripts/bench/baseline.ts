// `npm run bench:fleet -- --baseline REF [--pushes K]` (default K 10): a healthy node's push → applied time on this
// build beside an older one, in one run, as a ratio (issue 28: the signed messages, the accounts and the JWT
// sign-in must not slow it). REF (a commit, e.g. 4b88dcd, the last main on the v1 password bus) is exported with
// `git archive` into a temporary directory and built there to its own executable (build/build.mjs, sharing this
// checkout's node_modules). Each build gets its own mesh (`mesh init`, `mesh up`, one server), one node added,
// enrolled and running (`mesh-host run`); then K pushes of a 10-file declaration to it, the two builds taking
// turns so that the machine's load falls on both alike. Each is timed as the operator sees it: `mesh push NODE
// FILE` until it exits having heard the node's report (applied). Printed: each build's median and p90, and the
// ratio of this build's median to the baseline's. Everything runs under one temporary directory and is stopped
// at the end.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { awaitOutput, freePortPairs } from "../../test/mesh/operator.ts";
import { type CliResult, type Running, runCli, startCli } from "../../test/support/cli.ts";
import { ensureSea, REPO } from "../../test/support/sea.ts";
import { say } from "./fleet-mesh.ts";
import { formatMs, formatRatio, percentile } from "./stats.ts";

const BUILD_TIMEOUT_MS = 10 * 60_000;
const PUSH_WAIT_S = 120;
const NODE = "h1";

/** The executable of commit `ref`, built in `base`; throws with the build's words when it cannot be made. */
export function buildBaseline(ref: string, base: string): string {
  const tree = join(base, "baseline");
  mkdirSync(tree);
  const archive = spawnSync("sh", ["-c", `git -C "$0" archive "$1" | tar -x -C "$2"`, REPO, ref, tree], {
    encoding: "utf8",
  });
  if (archive.status !== 0) throw new Error(`git archive ${ref}: ${archive.stderr.trim()}`);
  symlinkSync(realpathSync(join(REPO, "node_modules")), join(tree, "node_modules"));
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const built = spawnSync(process.execPath, ["build/build.mjs"], {
    cwd: tree,
    env,
    encoding: "utf8",
    timeout: BUILD_TIMEOUT_MS,
  });
  if (built.status !== 0) throw new Error(`building ${ref}: ${built.stdout}${built.stderr}`);
  return join(tree, "dist", "mesh-host");
}

/** The CLI helpers with MESH_HOST_BIN naming `bin` for the one call (they read it as they spawn). */
function withBin<T>(bin: string, call: () => T): T {
  const was = process.env.MESH_HOST_BIN;
  process.env.MESH_HOST_BIN = bin;
  try {
    return call();
  } finally {
    process.env.MESH_HOST_BIN = was;
  }
}

interface Side {
  name: string;
  bin: string;
  dir: string;
  base: string;
  running: Running[];
  times: number[];
}

const meshOf = (s: Side, args: string[], input?: string): Promise<CliResult> =>
  withBin(s.bin, () => runCli(["mesh", "--mesh", s.dir, ...args], { input }));

function ok(r: CliResult, what: string): string {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** A mesh of one server and one running node, made and run by `s`'s executable. */
async function raiseSide(s: Side): Promise<void> {
  const [port] = await freePortPairs(1);
  ok(await meshOf(s, ["init", "--server", `127.0.0.1:${port}`]), `${s.name}: mesh init`);
  const up = withBin(s.bin, () => startCli(["mesh", "--mesh", s.dir, "up"]));
  s.running.push(up);
  await awaitOutput(up, (o) => o.stdout.includes("mesh up:"), `${s.name}: mesh up`);
  const code = ok(await meshOf(s, ["node", "add", NODE]), `${s.name}: node add`);
  const state = join(s.base, "state");
  const root = join(s.base, "root");
  mkdirSync(root, { recursive: true });
  const enrol = await withBin(s.bin, () =>
    runCli(["enrol", "--state", state, "--root", root], { input: code }),
  );
  ok(enrol, `${s.name}: enrol`);
  s.running.push(withBin(s.bin, () => startCli(["run", "--state", state, "--root", root])));
}

/** One push of a 10-file declaration (its content new each time), timed until the node's report is in. */
async function timedPush(s: Side, round: number): Promise<number> {
  const resources = Array.from({ length: 10 }, (_, i) => ({
    id: `f${i}`,
    type: "file",
    path: `/etc/bench/${i}.conf`,
    content: `round ${round} file ${i}\n`,
  }));
  const file = join(s.base, `decl-${round}.json`);
  writeFileSync(file, JSON.stringify({ v: 1, mode: "converged", resources }));
  const start = performance.now();
  const r = await meshOf(s, ["push", NODE, file, "--wait-s", String(PUSH_WAIT_S)]);
  const ms = performance.now() - start;
  ok(r, `${s.name}: push ${round}`);
  return ms;
}

export async function baselineBench(ref: string, pushes: number): Promise<void> {
  const base = mkdtempSync(join(tmpdir(), "bench-baseline-"));
  const side = (name: string, bin: string): Side => {
    mkdirSync(join(base, name));
    return { name, bin, dir: join(base, name, "mesh"), base: join(base, name), running: [], times: [] };
  };
  const sides: Side[] = [];
  let failed = true;
  try {
    sides.push(side(`baseline ${ref}`, buildBaseline(ref, base)), side("this build", ensureSea()));
    for (const s of sides) await raiseSide(s);
    // the first push to each waits for the node to dial: not timed
    for (const s of sides) await timedPush(s, 0);
    for (let round = 1; round <= pushes; round++)
      for (const s of round % 2 ? sides : [...sides].reverse()) s.times.push(await timedPush(s, round));
    say(`# bench:fleet --baseline ${ref} — ${new Date().toISOString().slice(0, 10)}, ${pushes} pushes each`);
    say("a healthy node, one server: `mesh push NODE FILE` (10 files) until its report (applied) is in");
    for (const s of sides)
      say(`${s.name}: median ${formatMs(percentile(s.times, 50))}, p90 ${formatMs(percentile(s.times, 90))}`);
    const [old, now] = sides as [Side, Side];
    say(`this build / baseline: ${formatRatio(percentile(now.times, 50), percentile(old.times, 50))}`);
    failed = false;
  } finally {
    for (const s of sides) for (const r of s.running.reverse()) await r.stop();
    if (failed) process.stderr.write(`bench:fleet --baseline: kept ${base} for its logs\n`);
    else rmSync(base, { recursive: true, force: true });
  }
}
