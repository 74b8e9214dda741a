// Scenario 5, concurrency: `mesh-host reconcile` started by hand while the host applies a delivered declaration.
// The lock must serialize them (their actions never overlap), both must finish, and the machine must end as
// the node's declaration says — the newest the mesh delivered, which is what the node keeps.
//
// Twice over: the real `run` against the mesh double, and run-child.ts (the real RunLoop fed signed envelopes from
// files), which places `reconcile` between two deliveries exactly, with no bus timing in the way.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureKeys, publicKeys, State } from "../../src/store/index.ts";
import { digestOf, makeMeshKey, signEnvelope } from "../../src/vocabulary/index.ts";
import { BusNode, until, withMesh } from "./bus.ts";
import {
  awaitLockBy,
  childCommand,
  describeExit,
  diffSnaps,
  type Exit,
  jsonOf,
  meshHost,
  type Outcome,
  type RunOptions,
  removeTemp,
  type Scenario,
  sha,
  snap,
  start,
  Tally,
  tempDir,
} from "./support.ts";

const CHILD = join(import.meta.dirname, "run-child.ts");
const NODE = "n1";
/** Long enough that a `reconcile` started meanwhile has read the kept declaration and waits for the lock. */
const ACTION_S = 0.6;

interface Place {
  base: string;
  root: string;
  state: string;
  log: string;
  key: ReturnType<typeof makeMeshKey>;
}

function place(): Place {
  const base = tempDir("mesh-chaos-conc-");
  const root = join(base, "root");
  mkdirSync(root);
  return { base, root, state: join(base, "state"), log: join(base, "actions.log"), key: makeMeshKey() };
}

/** A declaration whose files all say `tag`, and whose action marks its start and end in the log. */
function declaration(p: { log: string }, tag: string, node = NODE): object {
  const resources: object[] = [
    { id: "srv", type: "directory", path: "/srv", mode: "0755" },
    { id: "x", type: "directory", path: "/srv/x", mode: "0755" },
  ];
  for (let i = 0; i < 20; i++)
    resources.push({
      id: `f${i}`,
      type: "file",
      path: `/srv/x/f${i}`,
      content: `${tag} ${i}\n`,
      mode: "0644",
    });
  resources.push({
    id: "mark",
    type: "action",
    run: [
      "sh",
      "-c",
      `echo "start ${tag} $PPID" >> ${p.log}; sleep ${ACTION_S}; echo "end ${tag} $PPID" >> ${p.log}`,
    ],
  });
  return { v: 1, node, mode: "converged", resources };
}

function expected(tag: string): Map<string, string> {
  const e = new Map<string, string>([
    ["/srv", "dir 755"],
    ["/srv/x", "dir 755"],
  ]);
  for (let i = 0; i < 20; i++) e.set(`/srv/x/f${i}`, `file 644 ${sha(`${tag} ${i}\n`)}`);
  return e;
}

/** The action log: every start followed by its own end, never two applies' actions at once. */
function serialized(p: { log: string }): string[] {
  let lines: string[];
  try {
    lines = readFileSync(p.log, "utf8").trim().split("\n");
  } catch {
    return ["no action ran"];
  }
  for (let i = 0; i < lines.length; i += 2) {
    const [s, e] = [lines[i] ?? "", lines[i + 1] ?? ""];
    if (!s.startsWith("start ") || e !== s.replace(/^start /, "end "))
      return [`actions overlapped: ${lines.join(" | ")}`];
  }
  return [];
}

/** A node that holds a membership, a mode, and `tag`'s declaration kept as delivered with `seq`. */
function enrolledWith(p: Place, tag: string, seq: number): void {
  const state = new State(p.state).ensure();
  // its keys, as enrolment leaves them: a delivery is addressed to the identity key
  if (!ensureKeys(p.state).ok) throw new Error(`cannot make the node's keys in ${p.state}`);
  state.writeMembership({
    transport: "nats",
    servers: ["nats://127.0.0.1:4222"],
    fingerprint: "0".repeat(64),
    user: `node.${NODE}`,
    password: "not-used-offline",
    stream: "DECLARE",
    consumer: `node-${NODE}`,
    subject: `mesh.declare.${NODE}`,
    mesh_key: p.key.publicB64,
  });
  state.writeNode({ node: NODE, mode: "converged" });
  const body = JSON.stringify(declaration(p, tag));
  state.writeDeclared({
    seq,
    digest: digestOf(body),
    received_at: new Date().toISOString(),
    envelope: signEnvelope(body, p.key.privateKey),
  });
}

/** A delivery as the mesh signs it: its serial rises with its seq (protocol.md, "The signed order"). */
function envelopeFile(p: Place, tag: string, seq: number): string {
  const path = join(p.base, `envelope-${seq}.json`);
  const keys = ensureKeys(p.state);
  if (!keys.ok) throw new Error(keys.reason);
  const to = publicKeys(keys.keys).identity;
  const body = { ...declaration(p, tag), to, serial: seq, issued_at: new Date().toISOString() };
  writeFileSync(path, JSON.stringify(signEnvelope(JSON.stringify(body), p.key.privateKey)));
  return `${seq}:${path}`;
}

function keptSeq(p: Place): number | null {
  try {
    return new State(p.state).readDeclared()?.seq ?? null;
  } catch {
    return null;
  }
}

interface ReportDoc {
  report?: { outcome: string; declaration: { seq: number } };
}

function finished(exit: Exit, what: string): string[] {
  return exit.code === 0 ? [] : [`${what} did not finish cleanly: ${describeExit(exit)}`];
}

/**
 * `run` (the RunLoop) applies the delivered declarations `tags` in turn; `reconcile` is started by hand while the
 * first of them holds the lock. The machine must end as the last delivered one says.
 */
async function reconcileWhileRunApplies(tags: string[]): Promise<string[]> {
  const p = place();
  try {
    enrolledWith(p, "kept", 1);
    const deliveries = tags.map((tag, i) => envelopeFile(p, tag, i + 2));
    const run = start([...(await childCommand(CHILD)), p.state, p.root, ...deliveries]);
    // the host is applying the first delivery: it is kept, and the host holds the lock
    const applying =
      (await until(() => keptSeq(p) === 2)) && (await awaitLockBy(join(p.state, "lock"), run.pid));
    if (!applying) {
      const exit = await run.kill();
      return [`the host never applied the delivery: ${describeExit(exit)}`];
    }
    const reconcile = await meshHost([
      "reconcile",
      "--state",
      p.state,
      "--root",
      p.root,
      "--host",
      "linux",
      "--json",
    ]);
    const [runExit, recExit] = await Promise.all([run.exited, reconcile.exited]);
    const problems = [...finished(runExit, "the host (run)"), ...finished(recExit, "reconcile")];
    if (!runExit.stdout.includes("stopped stopped"))
      problems.push(`the host did not stop as asked: ${runExit.stdout.trim()}`);
    const doc = jsonOf<ReportDoc>(recExit);
    if (!doc.ok) problems.push(`reconcile: ${doc.reason}`);
    else if (doc.doc.report?.outcome !== "applied")
      problems.push(`reconcile said ${doc.doc.report?.outcome}`);
    problems.push(...serialized(p));
    const newest = tags.length + 1;
    if (keptSeq(p) !== newest) problems.push(`the node keeps seq ${keptSeq(p)}, not the newest ${newest}`);
    const applied = doc.ok ? doc.doc.report?.declaration.seq : undefined;
    const diff = diffSnaps(expected(tags.at(-1)!), snap(p.root), 2);
    if (diff.length)
      problems.push(
        `the machine is not the kept declaration's (seq ${newest}); reconcile applied seq ${applied} after it: ${diff.join(", ")}`,
      );
    return problems;
  } finally {
    removeTemp(p.base);
  }
}

/** Two offline `apply FILE` at once, the second started while the first holds the lock: the second's wins. */
async function twoApplies(): Promise<string[]> {
  const p = place();
  try {
    const files = ["one", "two"].map((tag) => {
      const path = join(p.base, `${tag}.json`);
      writeFileSync(path, JSON.stringify(declaration(p, tag)));
      return path;
    });
    const args = (file: string) => [
      "apply",
      file,
      "--root",
      p.root,
      "--state",
      p.state,
      "--host",
      "linux",
      "--json",
    ];
    const first = await meshHost(args(files[0]!));
    if (!(await awaitLockBy(join(p.state, "lock"), first.pid)))
      return [`the first apply never took the lock: ${describeExit(await first.kill())}`];
    const second = await meshHost(args(files[1]!));
    const exits = await Promise.all([first.exited, second.exited]);
    const problems = [...finished(exits[0], "the first apply"), ...finished(exits[1], "the second apply")];
    problems.push(...serialized(p));
    problems.push(
      ...diffSnaps(expected("two"), snap(p.root)).map((d) => `not the second declaration's: ${d}`),
    );
    return problems;
  } finally {
    removeTemp(p.base);
  }
}

/**
 * The real `run` on the mesh double applies B (its action holds the lock); C is published meanwhile; `reconcile`
 * is started by hand. Both finish; the machine and the kept declaration are C's.
 */
async function reconcileWhileRealRunApplies(): Promise<string[]> {
  return await withMesh(async (mesh) => {
    const node = await BusNode.enrolled(mesh, "conc");
    const log = { log: join(node.base, "actions.log") };
    try {
      await node.start();
      const seqB = await mesh.declare(node.name, declaration(log, "b", node.name));
      const keptB = await until(() => {
        try {
          return new State(node.state).readDeclared()?.seq === seqB;
        } catch {
          return false;
        }
      });
      if (!keptB || !(await awaitLockBy(join(node.state, "lock"), node.host!.pid)))
        return ["run never applied the first declaration"];
      const seqC = await mesh.declare(node.name, declaration(log, "c", node.name));
      const reconcile = await node.cli(["reconcile", "--json"]);
      const problems = finished(reconcile, "reconcile");
      const reported = await node.report(seqC, "applied");
      if (typeof reported === "string") problems.push(reported);
      await until(() => !existsSync(join(node.state, "lock")));
      problems.push(...serialized(log));
      const doc = jsonOf<ReportDoc>(reconcile);
      const applied = doc.ok ? doc.doc.report?.declaration.seq : undefined;
      const diff = diffSnaps(expected("c"), snap(join(node.root)), 2);
      if (diff.length)
        problems.push(
          `the machine is not the newest declaration's (seq ${seqC}); reconcile applied seq ${applied}: ${diff.join(", ")}`,
        );
      problems.push(...(await node.stop()));
      return problems;
    } finally {
      await node.kill();
    }
  });
}

export const concurrency: Scenario = {
  key: "concurrency",
  title: "5 concurrency (reconcile vs run, apply vs apply)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 5 : 2;
    for (let i = 0; i < rounds; i++) {
      await tally.try(`round ${i}: reconcile while run applies one delivery`, () =>
        reconcileWhileRunApplies(["b"]),
      );
      await tally.try(`round ${i}: reconcile while run applies a delivery with a newer one behind it`, () =>
        reconcileWhileRunApplies(["b", "c"]),
      );
      await tally.try(`round ${i}: two apply FILE at once`, () => twoApplies());
      // a bus and a server per try: once in the short form
      if (opts.long || i === 0)
        await tally.try(
          `round ${i}: reconcile while the real run applies, a newer declaration published meanwhile`,
          () => reconcileWhileRealRunApplies(),
        );
      opts.progress?.(`concurrency ${i + 1}/${rounds}`);
    }
    return tally.outcome();
  },
};
