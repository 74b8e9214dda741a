// Scenario 10, a hostile node beside healthy ones (issue 28): a real mesh (`mesh init`, `mesh up`, the built
// executable or the sources), two healthy nodes enrolled and running, and a third whose state directory is the
// attacker's — its membership and identity key, dialled as its own `run` would. Rounds of generated publishes
// (subjects and reply addresses chosen from what reaches the mesh's JetStream API, the buckets, the other nodes'
// subjects and acks, their enrolment inboxes, with generated bodies), floods of its own report and heartbeat
// subjects, and reports forged for the healthy nodes (signed by its own key, by no key, re-signed copies of their
// real reports). After each round everything held: every stream, bucket and consumer in place, the healthy nodes'
// pending declarations untouched, a push to each healthy node applied and reported, their rows in `mesh nodes` their
// own (no dropped message, no report but theirs), and `mesh up` still running.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import fc from "fast-check";
import { REPORTS_PER_NODE } from "../../src/defaults.ts";
import { MeshDir, serviceAuthenticator } from "../../src/mesh/index.ts";
import { loadKeys } from "../../src/store/index.ts";
import { signMessage } from "../../src/vocabulary/index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { asNodeOf } from "../mesh/state.ts";
import { type Running, runCli, startRun } from "../support/cli.ts";
import { type Outcome, type RunOptions, type Scenario, sleep, Tally, tempDir } from "./support.ts";

const HEALTHY = ["calm-1", "calm-2"];
const ROGUE = "rogue";
/** How long the answers to a round's publishes are given to land (they cross accounts asynchronously). */
const SETTLE_MS = 1_500;
/** A heartbeat flood a round: what one node sent in well under a second on the machine. */
const FLOOD = 20_000;
const WAIT = ["--wait-s", "120"];

/** Where a hostile publish may aim, and the replies it may name: the mesh's API, the buckets, the others. */
function targets(other: string): { subjects: string[]; replies: string[] } {
  const own = [
    `mesh.report.${ROGUE}`,
    `mesh.heartbeat.${ROGUE}`,
    `mesh.rekey.${ROGUE}`,
    `$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${ROGUE}`,
    `$JS.API.CONSUMER.INFO.DECLARE.node-${ROGUE}`,
    `$JS.ACK.DECLARE.node-${ROGUE}.1.1.1.0.0`,
    "$JS.API.DIRECT.GET.OBJ_mesh-releases",
  ];
  const theirs = [
    `mesh.report.${other}`,
    `mesh.heartbeat.${other}`,
    `mesh.declare.${other}`,
    `mesh.enrol.${other}`,
    `mesh.plan.${other}`,
    `$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${other}`,
    `$JS.ACK.DECLARE.node-${other}.1.1.1.0.0`,
    `_INBOX.enrol.${other}.x`,
  ];
  const api = [
    "$JS.API.STREAM.PURGE.REPORTS",
    "$JS.API.STREAM.PURGE.DECLARE",
    "$JS.API.STREAM.DELETE.DECLARE",
    "$JS.API.STREAM.DELETE.KV_mesh-nodes",
    `$JS.API.CONSUMER.DELETE.DECLARE.node-${other}`,
    "$JS.API.CONSUMER.CREATE.DECLARE",
    "$JS.API.STREAM.MSG.DELETE.DECLARE",
    `$KV.mesh-nodes.${other}`,
    `$KV.mesh-codes.${other}`,
    "$KV.mesh-fleet.calm-1",
    "$SYS.REQ.CLAIMS.UPDATE",
  ];
  return { subjects: [...own, ...theirs, ...api], replies: [...api, ...theirs, ...own] };
}

interface Act {
  subject: string;
  reply: string | undefined;
  body: Uint8Array;
}

function actArb(other: string): fc.Arbitrary<Act> {
  const { subjects, replies } = targets(other);
  const body = fc.oneof(
    fc.constant(new TextEncoder().encode(JSON.stringify({ batch: 1, no_wait: true }))),
    fc.constant(new Uint8Array()),
    fc.json().map((j) => new TextEncoder().encode(j)),
    fc.uint8Array({ maxLength: 512 }),
  );
  return fc.record({
    subject: fc.constantFrom(...subjects),
    reply: fc.option(fc.constantFrom(...replies), { nil: undefined }),
    body,
  });
}

interface Bed {
  dir: string;
  base: string;
  up: Running;
  runs: Running[];
  rogueState: string;
  serial: Record<string, number>;
}

async function enrol(dir: string, base: string, node: string): Promise<{ state: string; root: string }> {
  const added = await mesh(dir, ["node", "add", node]);
  if (added.code !== 0) throw new Error(`node add ${node}: ${added.stderr}`);
  const state = join(base, node, "state");
  const root = join(base, node, "root");
  mkdirSync(root, { recursive: true });
  const r = await runCli(["enrol", "--state", state, "--root", root], { input: added.stdout });
  if (r.code !== 0) throw new Error(`enrol ${node}: ${r.stderr}`);
  return { state, root };
}

async function bed(): Promise<Bed> {
  const base = tempDir("mesh-chaos-hostile-node-");
  const dir = join(base, "mesh");
  await initMesh(dir, await freePortPairs(1));
  const up = await meshUp(dir);
  const runs: Running[] = [];
  for (const node of HEALTHY) {
    const { state, root } = await enrol(dir, base, node);
    const run = startRun(state, root, ["--drift-s", "3600"]);
    runs.push(run);
    await awaitOutput(run, (o) => o.stderr.includes('"link up"'), `${node}'s link up`);
  }
  const rogue = await enrol(dir, base, ROGUE);
  return { dir, base, up, runs, rogueState: rogue.state, serial: {} };
}

/** Dial as the rogue node, exactly as its own `run` would. */
const asRogue = (state: string) => asNodeOf(state, ROGUE);

/** Streams, buckets, the healthy nodes' consumers and pending declarations: as a string to compare. */
async function shape(dir: string): Promise<string> {
  const m = new MeshDir(dir);
  const { connect } = await import("@nats-io/transport-node");
  const nc = await connect({
    servers: m.urls(),
    authenticator: serviceAuthenticator(m.accountKeys(), "mesh", "chaos-shape"),
    tls: { ca: m.certPem() },
  });
  try {
    const jsm = await jetstreamManager(nc);
    const names = (await jsm.streams.names().next()).sort();
    const out = [`streams:${names.join(",")}`];
    for (const node of HEALTHY) {
      const c = await jsm.consumers.info("DECLARE", `node-${node}`).then(
        (i) => `${i.name}:${i.delivered.stream_seq}`,
        () => "gone",
      );
      const last = await jsm.streams.getMessage("DECLARE", { last_by_subj: `mesh.declare.${node}` }).then(
        (msg) => msg?.seq ?? 0,
        () => 0,
      );
      // its own reports: what the rogue's forged ones must not add to
      const reported = await jsm.streams.getMessage("REPORTS", { last_by_subj: `mesh.report.${node}` }).then(
        (msg) => msg?.seq ?? 0,
        () => 0,
      );
      out.push(`${node}:${c}:${last}:${reported}`);
    }
    return out.join(" ");
  } finally {
    await nc.close();
  }
}

/** A push to each healthy node: applied and reported, the row in `mesh nodes` its own. */
async function healthy(b: Bed, round: number): Promise<string[]> {
  const problems: string[] = [];
  for (const node of HEALTHY) {
    const file = join(b.base, `${node}-${round}.json`);
    const content = `round ${round}\n`;
    writeFileSync(
      file,
      JSON.stringify({
        v: 1,
        mode: "converged",
        resources: [{ id: "f", type: "file", path: "/etc/f", content }],
      }),
    );
    const r = await mesh(b.dir, ["push", node, file, ...WAIT, "--json"]);
    const row = r.code === 0 ? JSON.parse(r.stdout).nodes[0] : null;
    if (row?.report?.outcome !== "applied")
      problems.push(`push to ${node} in round ${round}: exit ${r.code} ${r.stderr.trim().slice(0, 200)}`);
    else b.serial[node] = row.serial;
  }
  const nodes = await mesh(b.dir, ["nodes", "--json"]);
  if (nodes.code !== 0) return [...problems, `mesh nodes: ${nodes.stderr.trim()}`];
  type Row = {
    node: string;
    unverified_dropped: number;
    heartbeats_dropped: number;
    report: { serial: number } | null;
  };
  const rows = JSON.parse(nodes.stdout).nodes as Row[];
  for (const node of HEALTHY) {
    const row = rows.find((x) => x.node === node);
    if (!row) problems.push(`${node} is gone from mesh nodes`);
    else {
      if (row.unverified_dropped || row.heartbeats_dropped)
        problems.push(`${node} was charged for what another said: ${JSON.stringify(row)}`);
      if (row.report?.serial !== b.serial[node])
        problems.push(`${node}'s report is serial ${row.report?.serial}, not its own last ${b.serial[node]}`);
    }
  }
  if (b.up.child.exitCode !== null) problems.push(`mesh up exited ${b.up.child.exitCode}`);
  return problems;
}

/** The healthy nodes' real reports, as they lie in REPORTS: what a forger copies. */
async function realReports(dir: string): Promise<Uint8Array[]> {
  const m = new MeshDir(dir);
  const { connect } = await import("@nats-io/transport-node");
  const nc = await connect({
    servers: m.urls(),
    authenticator: serviceAuthenticator(m.accountKeys(), "mesh", "chaos-forger"),
    tls: { ca: m.certPem() },
  });
  try {
    const jsm = await jetstreamManager(nc);
    const out: Uint8Array[] = [];
    for (const node of HEALTHY) {
      const msg = await jsm.streams
        .getMessage("REPORTS", { last_by_subj: `mesh.report.${node}` })
        .catch(() => null);
      if (msg) out.push(msg.data);
    }
    return out;
  } finally {
    await nc.close();
  }
}

/** Reports for the healthy nodes, forged every way the rogue can: its key, no key, their own bytes re-sent. */
async function forge(b: Bed, nc: NatsConnection): Promise<number> {
  const keys = loadKeys(b.rogueState);
  if (!keys.ok) throw new Error(keys.reason);
  let sent = 0;
  for (const bytes of await realReports(b.dir)) {
    const report = JSON.parse(JSON.parse(new TextDecoder().decode(bytes)).body);
    const forged = [
      signMessage(report, keys.keys.identity.privateKey),
      { v: 2, body: JSON.stringify(report), sig: "A".repeat(86) + "==" },
      report,
    ];
    for (const subject of [`mesh.report.${ROGUE}`, `mesh.report.${report.node}`]) {
      nc.publish(subject, new TextDecoder().decode(bytes));
      for (const f of forged) nc.publish(subject, JSON.stringify(f));
      sent += forged.length + 1;
    }
  }
  return sent;
}

async function flood(nc: NatsConnection, identity: Parameters<typeof signMessage>[1]): Promise<void> {
  const beat = JSON.stringify(
    signMessage(
      {
        v: 1,
        node: ROGUE,
        at: new Date().toISOString(),
        version: "flood",
        uptime_s: 1,
        last: null,
        confirmed: false,
      },
      identity,
    ),
  );
  for (let i = 0; i < FLOOD; i++) {
    nc.publish(`mesh.heartbeat.${ROGUE}`, beat);
    if (i % 5_000 === 0) await nc.flush().catch(() => undefined);
  }
  for (let i = 0; i < REPORTS_PER_NODE + 20; i++) nc.publish(`mesh.report.${ROGUE}`, JSON.stringify({ i }));
  await nc.flush().catch(() => undefined);
}

/** A connection that still works: a permission violation may close one, and the next act needs a live one. */
async function live(nc: NatsConnection | null, state: string): Promise<NatsConnection> {
  if (nc && !nc.isClosed()) return nc;
  return await asRogue(state);
}

export const hostileNode: Scenario = {
  key: "hostile-node",
  title: "10 a hostile node beside healthy ones (reply tricks, floods, forged reports)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 10 : 2;
    const perRound = opts.long ? 200 : 60;
    const b = await bed();
    let nc: NatsConnection | null = null;
    try {
      const keys = loadKeys(b.rogueState);
      if (!keys.ok) throw new Error(keys.reason);
      await tally.try("the healthy nodes, before anything", () => healthy(b, 0));
      for (let round = 1; round <= rounds; round++) {
        const before = await shape(b.dir);
        const acts = fc.sample(actArb(HEALTHY[round % 2]!), { numRuns: perRound, seed: opts.seed + round });
        for (const act of acts) {
          nc = await live(nc, b.rogueState);
          nc.publish(act.subject, act.body, act.reply ? { reply: act.reply } : undefined);
        }
        nc = await live(nc, b.rogueState);
        await flood(nc, keys.keys.identity.privateKey);
        const forged = await forge(b, nc);
        await nc.flush().catch(() => undefined);
        await sleep(SETTLE_MS);
        // the round's acts held together: the bus after them is the bus before (a failure names the round's seed)
        await tally.try(
          `round ${round}: ${acts.length} generated publishes (seed ${opts.seed + round})`,
          async () => diff(before, await shape(b.dir)),
        );
        await tally.try(
          `round ${round}: ${FLOOD} heartbeats and a report flood, ${forged} forged reports`,
          () => healthy(b, round),
        );
        opts.progress?.(`hostile-node round ${round}/${rounds}`);
      }
      tally.notes.push(
        `hostile-node: ${rounds} rounds, each ${perRound} generated publishes, ${FLOOD} heartbeats, a report flood and forged reports`,
      );
    } finally {
      await nc?.close().catch(() => undefined);
      for (const r of [...b.runs, b.up]) await r.stop();
    }
    return tally.outcome();
  },
};

function diff(before: string, after: string): string[] {
  return before === after ? [] : [`the bus changed: ${before} → ${after}`];
}
