// `mesh up`: the mesh's servers in the foreground, and the controller's long-running half — answering
// enrolments, keeping the fleet view from reports and heartbeats. Run once on each server's machine (`--only I`),
// every controller shares the work: one durable consumer each for ENROL and REPORTS, one queue group for
// heartbeats, the state in the mesh's buckets (state.ts) — losing a machine loses nothing but its server. When
// one of its servers dies it stops the rest and exits 1 (the unit restarts it); stopped by a signal, it stops
// them and exits 0.
import type { JsMsg } from "@nats-io/jetstream";
import type { Subscription } from "@nats-io/transport-node";
import { FLOOD_LOG_MS } from "../defaults.ts";
import { flushed } from "../flushed.ts";
import { printable } from "../printable.ts";
import {
  ENROL_CONSUMER,
  EnrolQuestion,
  type Heartbeat,
  parseJsonBytes,
  REPORTS_CONSUMER,
  type Report,
} from "../vocabulary/index.ts";
import { nodeUserJwt, userOfIdentity } from "./accounts.ts";
import { awaitStreams, type Bus, connectBus, dropConsumer, firstLine, sweepConsumers } from "./bus.ts";
import { claimsBroughtUp, currentRevocations } from "./claims.ts";
import { answerable, consumeLoop, membershipOf, refusedAnswer, reply, sealedAnswer } from "./controller.ts";
import { admit } from "./enrolments.ts";
import { reportOf, serialOf } from "./fleet.ts";
import { heardFrom, identityOf } from "./heard.ts";
import { Budget, FleetWriter, takeHeartbeats } from "./heartbeats.ts";
import { Keeper } from "./keeper.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import { issuedAfter, NO_REVOCATIONS } from "./revocations.ts";
import { Rewakes } from "./rewake.ts";
import { recordLine, Said, subjectNode } from "./said.ts";
import { type RunningServer, runningServers, startServer, stopServer } from "./servers.ts";
import { type NodesAccount, shardOf } from "./shards.ts";
import { SpentCodes } from "./spent.ts";
import { changeNode, ensureBuckets, type NodeRecord, replicasOf, type State, stateOf } from "./state.ts";

export interface UpOptions {
  /** Only server I (from 1, in init's order); all of them when null. */
  only: number | null;
  /** A line for the operator (stdout): what is up. */
  say(line: string): void;
  /** A line on stderr: something went wrong and is being retried. */
  warn(line: string): void;
  /** Resolves when the operator stops it (a signal). */
  stop: Promise<void>;
}

function chosen(mesh: MeshDir, only: number | null): number[] {
  const count = mesh.config().servers.length;
  if (only !== null && (!Number.isInteger(only) || only < 1 || only > count))
    throw new MeshRefused(`--only must be a server from 1 to ${count}, not ${only}`);
  const indices = only === null ? Array.from({ length: count }, (_, j) => j + 1) : [only];
  const already = runningServers(mesh).filter((i) => indices.includes(i));
  if (already.length) throw new MeshRefused(`server ${already.join(", ")} of this mesh is already running`);
  return indices;
}

export async function up(mesh: MeshDir, opts: UpOptions): Promise<number> {
  const config = mesh.config();
  const indices = chosen(mesh, opts.only);
  const servers: RunningServer[] = [];
  let stopped = false;
  let controller: Controller | null = null;
  let bus: Bus | null = null;
  let hbBus: Bus | null = null;
  try {
    for (const i of indices) {
      servers.push(await startServer(mesh, i));
      const s = config.servers[i - 1]!;
      opts.say(`server ${i} ready on nats://${s.host}:${s.port}`);
    }
    const died = Promise.race(servers.map((s) => s.exited.then((how) => ({ index: s.index, how }))));
    bus = await connectBus(mesh, { reconnect: true, name: "mesh-host mesh up" });
    hbBus = await connectBus(mesh, { reconnect: true, name: "mesh-host mesh up (heartbeats)" });
    const running = new Controller(mesh, bus, hbBus, { say: opts.say, warn: opts.warn }, () => stopped);
    controller = running;
    void running
      .start(config.servers.length)
      .then((ready) => ready && opts.say(`mesh up: ${indices.length} server(s); answering enrolments`))
      .catch((e: Error) => opts.warn(e.message));
    const ended = await Promise.race([died, opts.stop.then(() => null)]);
    if (ended) {
      opts.warn(
        `server ${ended.index} ${ended.how}: the others are stopped (see ${mesh.serverDir(ended.index)}/server.log)`,
      );
      return 1;
    }
    return 0;
  } finally {
    stopped = true;
    await controller?.stop().catch((e: Error) => opts.warn(e.message));
    await hbBus?.close();
    await bus?.close();
    await Promise.all(servers.map(stopServer));
  }
}

class Controller {
  private readonly state: State;
  private readonly keeper: Keeper;
  private readonly budget = new Budget();
  private readonly writer: FleetWriter;
  private heartbeats: Subscription | null = null;
  private loops: Promise<void>[] = [];
  private floodTimer: NodeJS.Timeout | null = null;
  private readonly withdrawing = new Set<string>();
  /** Nodes whose new facts are being written: one write at a time a node. */
  private readonly refacting = new Set<string>();
  private readonly warn: (line: string) => void;
  /** What it heard and did, for the operator: a line each, the same one not repeated within a minute. */
  private readonly said: Said;
  /** What went wrong with a node's message: on stderr, the same one not repeated within a minute. */
  private readonly refused: Said;
  /** Spent codes' enrolling users, revoked in batches after their answers. */
  private readonly spent: SpentCodes;
  /** SYS, for reading NODES' revocations at an enrolment: opened at the first, kept until stop. */
  private sys: Promise<Bus> | null = null;
  /** Nodes whose heartbeats stay behind their last push, woken again. */
  private readonly rewakes: Rewakes;

  constructor(
    private readonly mesh: MeshDir,
    private readonly bus: Bus,
    /** The heartbeats' own connection: a flood that makes the server cut it leaves `bus` alone. */
    private readonly hbBus: Bus,
    lines: { say(line: string): void; warn(line: string): void },
    private readonly stopped: () => boolean,
  ) {
    this.warn = lines.warn;
    this.said = new Said(lines.say);
    this.refused = new Said(lines.warn);
    this.state = stateOf(bus);
    this.keeper = new Keeper(this.state, this.warn, (node, change) =>
      this.said.say(`${change}:${node}`, recordLine(node, change)),
    );
    this.writer = new FleetWriter(this.state, this.warn);
    this.rewakes = new Rewakes(bus, (node, serial, heard) =>
      this.said.say(
        "rewoke",
        `woke node ${node} again: its heartbeats name ${heard === null ? "no declaration" : `declaration ${heard}`}, behind its serial ${serial}`,
      ),
    );
    this.spent = new SpentCodes(mesh, () => [...this.keeper.codes.values()].map((e) => e.value), this.warn);
  }

  /** The accounts' claims brought up to this release (claims.ts claimsBroughtUp), said when any was pushed. */
  private async claimsUp(): Promise<void> {
    try {
      const pushed = await claimsBroughtUp(this.mesh);
      if (pushed.length)
        this.said.say(
          `claims:${pushed.join(",")}`,
          `brought the ${pushed.join(" and ")} account's claims up to this release`,
        );
    } catch (e) {
      this.warn(`the accounts' claims were not brought up to this release: ${firstLine(e)}`);
    }
  }

  /** False when stopped before JetStream answered. */
  async start(servers: number): Promise<boolean> {
    const made = await awaitStreams(this.bus, servers, this.stopped, this.warn, () =>
      ensureBuckets(this.state, replicasOf(servers)),
    );
    if (!made) return false;
    await this.keeper.start();
    await this.claimsUp();
    // no consumer is made for a node: one enrolled now reads directly, and one enrolled before keeps its own (a
    // durable on the bus) until it enrols again; consumers whose node has no record, or reads directly now, go
    await sweepConsumers(this.bus, async (node) => {
      const record = await this.state.nodes.get(node);
      if (!record) return this.keeper.nodes.has(node) ? "other" : "none";
      return record.value.account ? "shard" : "other";
    });
    this.heartbeats = takeHeartbeats(
      this.hbBus.nc,
      (node) => this.keeper.nodes.get(node),
      this.budget,
      this.writer,
      (node, heartbeat) => {
        this.withdraw(node);
        this.followFacts(node, heartbeat.facts);
        const record = this.keeper.nodes.get(node);
        if (record) void this.rewakes.heard(node, heartbeat, record);
      },
      {
        refused: (subject, why) => this.refusedMessage(subject, "heartbeat", why),
        unverified: (node, why) => this.unverified(node, "heartbeat", why),
      },
    );
    this.loops.push(
      consumeLoop(this.bus, "ENROL", ENROL_CONSUMER, (m) => this.answer(m), this.stopped, this.warn),
      consumeLoop(this.bus, "REPORTS", REPORTS_CONSUMER, (m) => this.report(m), this.stopped, this.warn),
    );
    this.floodTimer = setInterval(() => this.sayFloods(), FLOOD_LOG_MS);
    const closed = "the connection to the bus closed before it took the controller's subscriptions";
    await Promise.all([flushed(this.bus.nc, closed), flushed(this.hbBus.nc, closed)]);
    return true;
  }

  async stop(): Promise<void> {
    this.heartbeats?.unsubscribe();
    this.keeper.stop();
    if (this.floodTimer) clearInterval(this.floodTimer);
    this.sayFloods();
    await this.writer.flush();
    await this.spent.stop();
    await this.sys?.then((sys) => sys.close()).catch(() => undefined);
  }

  /** An enrolment question: answered with the membership sealed to its key, or refused with a reason. */
  private async answer(m: JsMsg): Promise<void> {
    // handed to this controller: the others are not handed it again while it works (SHARED_ACK_WAIT_MS)
    m.working();
    const json = parseJsonBytes(m.data);
    const parsed = json.ok ? EnrolQuestion.safeParse(json.value) : null;
    if (!parsed?.success) {
      this.refused.say(`malformed:${m.subject}`, `a malformed enrolment question on ${m.subject}: ignored`);
      m.ack();
      return;
    }
    const q = parsed.data;
    // the reply is checked before anything is spent: a question naming another address spends nothing
    if (!answerable(q.node, q.reply)) {
      this.refused.say(
        `enrol-reply:${q.node}`,
        `an enrolment question for ${q.node} names the reply ${printable(q.reply, 80)}, not its enrolment inbox: refused, unanswered`,
      );
      m.ack();
      return;
    }
    const user = userOfIdentity(q.keys.identity);
    const admitted = user
      ? await admit(this.state, q, m.subject)
      : "the identity key is not an Ed25519 public key";
    if (typeof admitted === "string") {
      this.refused.say(`enrol:${q.node}`, `refused an enrolment as node ${q.node}: ${admitted}`);
      await reply(this.bus.nc, q.node, q.reply, refusedAnswer(admitted));
    } else {
      const config = this.mesh.config();
      const membership = membershipOf(q.node, {
        servers: this.mesh.urls(),
        fingerprint: config.fingerprint,
        meshKey: config.mesh_key,
        jwt: nodeUserJwt(this.mesh.accountKeys(), q.node, user!, await this.issuedAt(user!, shardOf(q.node))),
      });
      await reply(this.bus.nc, q.node, q.reply, sealedAnswer(q, membership));
      // counted from its own answer, never a burst's first (a code spent late in a burst was revoked before its
      // answer went out), and only once answered: a failure above leaves the question to be handed out again
      // and answered to the same keys, which a revocation would have cut off
      this.spent.answered(admitted.spent);
      // its old consumer is of no use to its new user; a failure here is swept at the next start
      if (admitted.consumerLeft) await dropConsumer(this.bus, q.node);
      this.said.say(
        `enrolled:${q.node}:${q.keys.identity}`,
        `enrolled node ${q.node} (${printable(q.facts.hostname ?? "?", 64)})`,
      );
    }
    m.ack();
  }

  /**
   * The issued-at of a node user's JWT: after any revocation of that key the servers hold (accounts.ts), read over
   * one SYS connection kept for it (an enrolment of ten thousand nodes opens one, not ten thousand).
   */
  private async issuedAt(user: string, account: NodesAccount): Promise<number> {
    this.sys ??= connectBus(this.mesh, { reconnect: true, system: true, name: "mesh-host mesh up (system)" });
    const held = await this.sys.then(
      (sys) => currentRevocations(sys.nc, this.mesh.accountKeys(), account),
      () => {
        // not reached this time: the next enrolment dials again; this one is issued now, as before the rule
        this.sys = null;
        return NO_REVOCATIONS;
      },
    );
    return issuedAfter(held, user);
  }

  /** A report, read once across every controller (REPORTS' one durable): the fleet entry written at once. */
  private async report(m: JsMsg): Promise<void> {
    const record = (await this.state.nodes.get(m.subject.slice("mesh.report.".length)))?.value ?? null;
    const why = this.reportRefusal(m, record);
    if (why) this.refusedMessage(m.subject, "report", why);
    m.ack();
  }

  /** Why a report is not kept (said), or null once it is. */
  private reportRefusal(m: JsMsg, record: NodeRecord | null): string | null {
    // a node removed is no longer read
    if (!record) return "from no node of this mesh (removed?)";
    if (!record.keys) return "from a node that has not enrolled";
    // the node's only when signed by the key it enrolled with (heard.ts): anything else is dropped and counted
    const r = heardFrom(record.node, identityOf(record), m.data, "report");
    if (!r.ok) {
      this.writer.heard(record.node, { unverified: 1 }, true);
      return this.unverified(record.node, "report", r.reason);
    }
    // a report is what an operator looks for right after a push: written now, not with the next batch
    this.writer.heard(record.node, { report: reportOf(r.value, record) }, true);
    if (r.value.outcome === "refused") this.nodeRefused(r.value, record);
    this.withdraw(record.node);
    return null;
  }

  private refusedMessage(subject: string, kind: string, why: string): void {
    this.refused.say(`${kind}:${subject}`, `refused a ${kind} on ${subjectNode(subject)}'s subject: ${why}`);
  }

  /**
   * A message on a node's subject that the node did not sign: someone is speaking as it (a forgery, a replay
   * from another key, a v1 node's unsigned message). Counted in its fleet entry by the caller; said at once, then
   * at most once a minute with how many more (Said).
   */
  private unverified(node: string, kind: string, why: string): null {
    this.refused.say(
      `unverified:${kind}:${node}`,
      `dropped a ${kind} on ${node}'s subject, not signed by its identity key: ${printable(why, 200)}`,
    );
    return null;
  }

  /** A node refused a declaration (a replay of an older one, a path unsafe on the node): said, with its serial. */
  private nodeRefused(report: Report, record: NodeRecord): void {
    const serial = serialOf(record, report.declaration.digest);
    const why = report.refusals.map((r) => r.reason).join("; ") || report.outcome;
    this.refused.say(
      `node-refused:${report.node}:${report.declaration.digest}`,
      `node ${report.node} ${report.outcome} ${serial === null ? "a declaration this mesh has no serial for" : `serial ${serial}`}: ${printable(why, 200)}`,
    );
  }

  /**
   * The node spoke as itself: its spent code goes from the bucket (its enrolling user was revoked a moment after
   * the answer).
   */
  private withdraw(node: string): void {
    const code = this.keeper.codes.get(node);
    if (!code?.value.spent || this.withdrawing.has(node)) return;
    this.withdrawing.add(node);
    void this.state.codes
      .remove(node, code.revision)
      .catch(() => undefined)
      .finally(() => {
        this.withdrawing.delete(node);
        this.keeper.touched("codes", node);
      });
  }

  /**
   * The node's facts as its heartbeat says them now: its record follows when they differ (a kernel upgraded,
   * memory added), so `--where` selects by what the node is, not what it was at enrolment. One write a change.
   */
  private followFacts(node: string, facts: Heartbeat["facts"]): void {
    const record = this.keeper.nodes.get(node);
    if (!facts || !record || this.refacting.has(node) || sameFacts(record.facts, facts)) return;
    this.refacting.add(node);
    void changeNode(this.state, node, (r) => ({ value: { ...r, facts: { ...facts } }, result: undefined }))
      .catch((e: Error) => this.warn(`node ${node}'s facts not kept: ${e.message}`))
      .finally(() => {
        this.refacting.delete(node);
        this.keeper.touched("nodes", node);
      });
  }

  /** Once a minute at most: which nodes sent more heartbeats than their budget, and how many were dropped. */
  private sayFloods(): void {
    for (const [node, dropped] of this.budget.drained())
      this.warn(`node ${node} sent heartbeats past its budget: ${dropped} dropped unread`);
  }
}

/** The same facts, whatever their keys' order. */
function sameFacts(a: Record<string, string> | null, b: Record<string, string>): boolean {
  const sorted = (o: Record<string, string>) => JSON.stringify(Object.entries(o).sort());
  return a !== null && sorted(a) === sorted(b);
}
