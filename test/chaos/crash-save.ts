// Scenario 2, crash during save: a child rewrites records.json and membership.json in a loop, alternating two
// known contents, and is SIGKILLed at a random instant (most often between writing the temp file and renaming
// it). What is read back must be exactly the old content or the new, and must parse: never a torn file.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { STATE_FORMAT } from "../../src/defaults.ts";
import { State } from "../../src/store/index.ts";
import { makeMeshKey } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import {
  childCommand,
  type Outcome,
  type RunOptions,
  removeTemp,
  rng,
  type Scenario,
  sleep,
  start,
  Tally,
  tempDir,
  tempsUnder,
} from "./support.ts";

const CHILD = join(import.meta.dirname, "save-child.ts");

/** Two records files big enough (~0.5 MiB) that no single write(2) could carry one whole. */
function recordsText(tag: string): string {
  const records: Record<string, object> = {};
  const order: string[] = [];
  for (let i = 0; i < 2500; i++) {
    const id = `f${i}`;
    records[id] = {
      type: "file",
      path: `/srv/${tag}/${id}.conf`,
      created: i % 2 === 0,
      wrote: "ab".repeat(32),
      mode: "0644",
    };
    order.push(id);
  }
  return `${JSON.stringify({ format: STATE_FORMAT, records, order }, null, 1)}\n`;
}

function membershipText(tag: string): string {
  const membership = {
    transport: "nats",
    servers: [`nats://${tag}.example:4222`],
    fingerprint: "0".repeat(64),
    user: "node.n1",
    password: `password-${tag}`,
    stream: "DECLARE",
    consumer: "node-n1",
    subject: "mesh.declare.n1",
    mesh_key: makeMeshKey().publicB64,
  };
  return `${JSON.stringify({ format: STATE_FORMAT, membership }, null, 1)}\n`;
}

interface Fixture {
  base: string;
  dir: string;
  inputs: string[];
  records: [string, string];
  membership: [string, string];
}

function fixture(): Fixture {
  const base = tempDir("mesh-chaos-save-");
  const dir = join(base, "state");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const records: [string, string] = [recordsText("a"), recordsText("b")];
  const membership: [string, string] = [membershipText("a"), membershipText("b")];
  const inputs = [...records, ...membership].map((text, i) => {
    const path = join(base, `input-${i}`);
    writeFileSync(path, text);
    return path;
  });
  return { base, dir, inputs, records, membership };
}

/** One kill: start the writer, let it run a random while, SIGKILL it, read back. */
async function killOnce(
  mode: "atomic" | "plain",
  f: Fixture,
  delayMs: number,
): Promise<{ problems: string[]; temps: number }> {
  const tempsBefore = tempsUnder(f.dir).length;
  const child = start([...(await childCommand(CHILD)), mode, f.dir, ...f.inputs]);
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), EVENT_WAIT_MS);
    child.child.stdout!.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) {
        clearTimeout(timer);
        resolve(true);
      }
    });
  });
  if (!ready) {
    const exit = await child.kill();
    return { problems: [`the writer never got ready: ${exit.stderr.slice(0, 200)}`], temps: 0 };
  }
  await sleep(delayMs);
  await child.kill();
  const problems: string[] = [];
  const check = (name: string, candidates: [string, string]) => {
    const text = readFileSync(join(f.dir, name), "utf8");
    if (text !== candidates[0] && text !== candidates[1])
      problems.push(`${name} is neither the old nor the new content (${text.length} bytes)`);
  };
  check("records.json", f.records);
  check("membership.json", f.membership);
  const state = new State(f.dir);
  try {
    state.readRecords();
    if (!state.readMembership()) problems.push("membership.json reads as absent");
  } catch (e) {
    problems.push(`the state does not parse: ${(e as Error).message}`);
  }
  return { problems, temps: tempsUnder(f.dir).length - tempsBefore };
}

export const crashDuringSave: Scenario = {
  key: "crash-save",
  title: "2 crash during save (SIGKILL)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rand = rng(opts.seed);
    const n = opts.long ? 100 : 20;
    const f = fixture();
    let leftTemps = 0;
    try {
      for (let i = 0; i < n; i++) {
        const delay = 5 + rand() * 150;
        await tally.try(`kill ${i} after ${Math.round(delay)} ms`, async () => {
          const { problems, temps } = await killOnce("atomic", f, delay);
          if (temps) leftTemps++;
          return problems;
        });
        opts.progress?.(`crash-save ${i + 1}/${n}`);
      }
      // the control: the same check against plain in-place writes must see torn files, or it proves nothing
      let torn = 0;
      const controls = opts.long ? 20 : 5;
      for (let i = 0; i < controls; i++) {
        const { problems } = await killOnce("plain", f, 5 + rand() * 150);
        if (problems.length) torn++;
      }
      tally.notes.push(
        `${leftTemps}/${n} kills left a temp file beside the state files (the next apply must sweep it: scenario 1 checks that)`,
        `control, plain writeFileSync instead of the atomic write: torn or unparseable in ${torn}/${controls} kills`,
      );
      if (torn === 0)
        tally.failures.push("the control never saw a torn file: this check cannot tell atomic from not");
    } finally {
      removeTemp(f.base);
    }
    return tally.outcome();
  },
};
