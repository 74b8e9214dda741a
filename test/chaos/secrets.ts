// Scenario 7, the part that needs no bus: sealed secrets through the offline apply. Known values are sealed to
// the node's key; every byte the host prints, logs, reports or keeps (outside its key files) is searched for
// them — as text, base64 and hex. The declared file holds the value with its declared mode, and nothing else does.
// The same over the bus (enrol, token, password, reports, heartbeats, outbox) is secrets-flow.ts.
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { ensureKeys, publicKeys } from "../../src/store/index.ts";
import { seal } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS, untilFileArgv } from "../support/events.ts";
import {
  awaitLockBy,
  describeExit,
  type Exit,
  leakedForm,
  meshHost,
  type Outcome,
  type RunOptions,
  removeTemp,
  type Scenario,
  sleep,
  Tally,
  tempDir,
} from "./support.ts";

const NODE = "n1";
const PATH = "/etc/app/password";

interface Place {
  base: string;
  root: string;
  state: string;
  sealingKey: string;
  outputs: string[];
}

function place(): Place {
  const base = tempDir("mesh-chaos-secret-");
  const root = join(base, "root");
  const state = join(base, "state");
  mkdirSync(join(root, "etc/app"), { recursive: true });
  const keys = ensureKeys(state);
  if (!keys.ok) throw new Error(keys.reason);
  return { base, root, state, sealingKey: publicKeys(keys.keys).sealing, outputs: [] };
}

const secretValue = (tag: string) => `chaos-${tag}-${randomBytes(12).toString("hex")}`;

function declarationFile(p: Place, name: string, value: string, after: object[] = []): string {
  const decl = {
    v: 1,
    node: NODE,
    mode: "converged",
    resources: [
      { id: "app", type: "directory", path: "/etc/app", mode: "0755" },
      { id: "password", type: "file", path: PATH, secret: "db", mode: "0600" },
      ...after,
    ],
    secrets: { db: seal(Buffer.from(value), p.sealingKey) },
  };
  const path = join(p.base, `${name}.json`);
  writeFileSync(path, JSON.stringify(decl));
  return path;
}

async function cli(p: Place, args: string[]): Promise<Exit> {
  const run = await meshHost([...args, "--root", p.root, "--state", p.state, "--host", "linux"], {
    env: { MESH_LOG: "debug" },
  });
  const exit = await run.exited;
  p.outputs.push(exit.stdout, exit.stderr);
  return exit;
}

/** Every file under the state directory except the key files, as [relative path, bytes]. */
function stateFiles(state: string): [string, Buffer][] {
  const out: [string, Buffer][] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const abs = join(dir, name);
      const rel = relative(state, abs);
      if (rel === "identity") continue;
      if (statSync(abs).isDirectory()) walk(abs);
      else out.push([rel, readFileSync(abs)]);
    }
  };
  walk(state);
  return out;
}

/** Where any form of any of `values` shows: in what was printed or logged, or in the state directory. */
function leaks(p: Place, values: string[]): string[] {
  const problems: string[] = [];
  for (const value of values) {
    p.outputs.forEach((text, i) => {
      const form = leakedForm(text, value);
      if (form)
        problems.push(
          `${i % 2 ? "stderr" : "stdout"} of run ${Math.floor(i / 2) + 1} shows a secret ${form}`,
        );
    });
    for (const [rel, bytes] of stateFiles(p.state)) {
      const form = leakedForm(bytes, value);
      if (form) problems.push(`the state file ${rel} holds a secret ${form}`);
    }
  }
  return [...new Set(problems)];
}

/** The holds' index says how to give an original back (digest, mode, owner), never what it was. */
function indexHoldsNoContent(p: Place): string[] {
  let index: { entries?: Record<string, { meta?: Record<string, unknown> }> };
  try {
    index = JSON.parse(readFileSync(join(p.state, "holds/index.json"), "utf8"));
  } catch {
    return [];
  }
  return Object.entries(index.entries ?? {}).flatMap(([path, e]) => {
    const extra = Object.keys(e.meta ?? {}).filter((k) => !["mode", "uid", "gid"].includes(k));
    return extra.length
      ? [`holds/index.json keeps ${extra.join(" and ")} of ${path}'s original beside its mode`]
      : [];
  });
}

function holdsValue(p: Place, value: string): string[] {
  const abs = join(p.root, PATH);
  const problems: string[] = [];
  if (readFileSync(abs, "utf8") !== value) problems.push(`${PATH} does not hold the declared secret`);
  const mode = statSync(abs).mode & 0o777;
  if (mode !== 0o600) problems.push(`${PATH} has mode ${mode.toString(8)}, not 600`);
  return problems;
}

/** plan, apply (--json and human), a changed secret with a failing action after it: nothing leaks. */
async function offlineFlow(): Promise<string[]> {
  const p = place();
  try {
    const one = secretValue("one");
    const two = secretValue("two");
    const first = declarationFile(p, "first", one);
    const problems: string[] = [];
    const expect = (exit: Exit, code: number, what: string) => {
      if (exit.code !== code) problems.push(`${what}: ${describeExit(exit)}`);
    };
    expect(await cli(p, ["plan", first]), 0, "plan");
    expect(await cli(p, ["apply", first, "--json"]), 0, "apply --json");
    problems.push(...holdsValue(p, one));
    expect(await cli(p, ["apply", first]), 0, "apply again");
    const failing = declarationFile(p, "failing", two, [
      { id: "after", type: "action", run: ["sh", "-c", "echo the action failed >&2; exit 3"] },
    ]);
    expect(await cli(p, ["apply", failing, "--json"]), 1, "apply with a failing action");
    problems.push(...holdsValue(p, two));
    problems.push(...leaks(p, [one, two]));
    return problems;
  } finally {
    removeTemp(p.base);
  }
}

/**
 * A crash after a new secret is written and before the records are saved, then another secret: the value the
 * crash left on disk is the mesh's own, and must not be kept in holds/ as if it had been found there.
 */
async function crashFlow(): Promise<string[]> {
  const p = place();
  try {
    writeFileSync(join(p.root, PATH), "the machine's own password\n", { mode: 0o640 });
    const [one, two, three] = [secretValue("one"), secretValue("two"), secretValue("three")];
    const problems: string[] = [];
    // the action after the file runs until the kill, however slow the machine (its file is never made)
    const slow = [{ id: "slow", type: "action", run: untilFileArgv(join(p.base, "never")) }];
    const exit1 = await cli(p, ["apply", declarationFile(p, "one", one), "--json"]);
    if (exit1.code !== 0) return [`the first apply: ${describeExit(exit1)}`];
    // killed while the action after the file runs: the file holds `two`, the records still say `one`
    const victim = await meshHost(
      [
        "apply",
        declarationFile(p, "two", two, slow),
        "--root",
        p.root,
        "--state",
        p.state,
        "--host",
        "linux",
      ],
      { env: { MESH_LOG: "debug" } },
    );
    await awaitLockBy(join(p.state, "lock"), victim.pid);
    const deadline = performance.now() + EVENT_WAIT_MS;
    while (performance.now() < deadline && readFileSync(join(p.root, PATH), "utf8") !== two) await sleep(2);
    const killed = await victim.kill();
    p.outputs.push(killed.stdout, killed.stderr);
    if (killed.signal !== "SIGKILL")
      return [`the apply to be killed ended on its own: ${describeExit(killed)}`];
    const again = await cli(p, ["apply", declarationFile(p, "two-again", two), "--json"]);
    if (again.code !== 0) problems.push(`the next run: ${describeExit(again)}`);
    const next = await cli(p, ["apply", declarationFile(p, "three", three), "--json"]);
    if (next.code !== 0) problems.push(`the apply of a third secret: ${describeExit(next)}`);
    problems.push(...holdsValue(p, three));
    problems.push(...leaks(p, [one, two, three]));
    problems.push(...indexHoldsNoContent(p));
    return problems;
  } finally {
    removeTemp(p.base);
  }
}

export const offlineSecrets: Scenario = {
  key: "secrets-offline",
  title: "7 secrets (offline apply, crash)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 3 : 1;
    for (let i = 0; i < rounds; i++) {
      await tally.try(`round ${i}: plan, apply, a failing apply`, offlineFlow);
      await tally.try(`round ${i}: a crash between writing a secret and saving the records`, crashFlow);
    }
    return tally.outcome();
  },
};
