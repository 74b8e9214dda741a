// `mesh up`: the mesh's servers in the foreground, and the controller's long-running half — answering
// enrolments, keeping the fleet view from reports and heartbeats. When one of its servers dies it stops the
// rest and exits 1 (the unit restarts it); stopped by a signal, it stops them and exits 0.
import type { JsMsg } from "@nats-io/jetstream";
import type { Subscription } from "@nats-io/transport-node";
import { FLEET_WRITE_MS } from "../defaults.ts";
import {
  ENROL_CONSUMER,
  EnrolQuestion,
  Heartbeat,
  parseJsonBytes,
  printable,
  REPORTS_CONSUMER,
  Report,
} from "../vocabulary/index.ts";
import { awaitStreams, type Bus, connectBus, ensureNodeConsumer, sweepConsumers } from "./bus.ts";
import { consumeLoop, membershipOf, refusedAnswer, reply, sealedAnswer } from "./controller.ts";
import { lockMesh } from "./files.ts";
import { heardHeartbeat, heardReport, serialOf } from "./fleet.ts";
import { type Fleet, type MeshDir, MeshRefused, type NodeRecord } from "./layout.ts";
import { followRecords, recordLine, Said, subjectNode } from "./said.ts";
import { type RunningServer, reloadUsers, runningServers, startServer, stopServer } from "./servers.ts";

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
  try {
    for (const i of indices) {
      servers.push(await startServer(mesh, i));
      const s = config.servers[i - 1]!;
      opts.say(`server ${i} ready on nats://${s.host}:${s.port}`);
    }
    const died = Promise.race(servers.map((s) => s.exited.then((how) => ({ index: s.index, how }))));
    bus = await connectBus(mesh, { reconnect: true, name: "mesh-host mesh up" });
    const running = new Controller(mesh, bus, { say: opts.say, warn: opts.warn }, () => stopped);
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
    await controller?.stop();
    await bus?.close();
    await Promise.all(servers.map(stopServer));
  }
}

class Controller {
  private heartbeats: Subscription | null = null;
  private loops: Promise<void>[] = [];
  private fleet: Fleet;
  private fleetTimer: NodeJS.Timeout | null = null;
  private readonly spent = new Set<string>();
  private spendTimer: NodeJS.Timeout | null = null;
  private readonly warn: (line: string) => void;
  /** What it heard and did, for the operator: a line each, the same one not repeated within a minute. */
  private readonly said: Said;
  /** What went wrong with a node's message: on stderr, the same one not repeated within a minute. */
  private readonly refused: Said;
  private unfollow: () => void = () => {};

  constructor(
    private readonly mesh: MeshDir,
    private readonly bus: Bus,
    lines: { say(line: string): void; warn(line: string): void },
    private readonly stopped: () => boolean,
  ) {
    this.fleet = mesh.fleet();
    this.warn = lines.warn;
    this.said = new Said(lines.say);
    this.refused = new Said(lines.warn);
  }

  /** False when stopped before JetStream answered. */
  async start(replicas: number): Promise<boolean> {
    if (!(await awaitStreams(this.bus, replicas, this.stopped, this.warn))) return false;
    const records = this.mesh.nodes();
    for (const r of records) await ensureNodeConsumer(this.bus, r.node);
    await sweepConsumers(this.bus, new Set(records.map((r) => r.node)));
    this.heartbeats = this.bus.nc.subscribe("mesh.heartbeat.>", {
      callback: (err, m) => {
        if (!err) void this.heard(m.subject, m.data, "heartbeat").catch((e: Error) => this.warn(e.message));
      },
    });
    this.loops.push(
      consumeLoop(this.bus, "ENROL", ENROL_CONSUMER, (m) => this.answer(m), this.stopped, this.warn),
    );
    this.loops.push(
      consumeLoop(
        this.bus,
        "REPORTS",
        REPORTS_CONSUMER,
        async (m) => {
          await this.heard(m.subject, m.data, "report");
          m.ack();
        },
        this.stopped,
        this.warn,
      ),
    );
    await this.bus.nc.flush();
    this.unfollow = followRecords(this.mesh, (node, change) =>
      this.said.say(`${change}:${node}`, recordLine(node, change)),
    );
    return true;
  }

  async stop(): Promise<void> {
    this.unfollow();
    this.heartbeats?.unsubscribe();
    if (this.fleetTimer) clearTimeout(this.fleetTimer);
    if (this.spendTimer) clearTimeout(this.spendTimer);
    this.flushFleet();
  }

  /** An enrolment question: answered with the membership sealed to its key, or refused with a reason. */
  private async answer(m: JsMsg): Promise<void> {
    const json = parseJsonBytes(m.data);
    const parsed = json.ok ? EnrolQuestion.safeParse(json.value) : null;
    if (!parsed?.success) {
      this.refused.say(`malformed:${m.subject}`, `a malformed enrolment question on ${m.subject}: ignored`);
      m.ack();
      return;
    }
    const q = parsed.data;
    const refusal = await this.admit(q, m.subject);
    if (refusal) {
      this.refused.say(`enrol:${q.node}`, `refused an enrolment as node ${q.node}: ${refusal}`);
      await reply(this.bus.nc, q.reply, refusedAnswer(refusal));
    } else {
      const record = this.mesh.known(q.node);
      const config = this.mesh.config();
      const membership = membershipOf(q.node, {
        servers: this.mesh.urls(),
        fingerprint: config.fingerprint,
        meshKey: config.mesh_key,
        password: record.password,
      });
      await reply(this.bus.nc, q.reply, sealedAnswer(q, membership));
      this.said.say(
        `enrolled:${q.node}:${q.keys.identity}`,
        `enrolled node ${q.node} (${printable(q.facts.hostname ?? "?", 64)})`,
      );
    }
    m.ack();
  }

  /**
   * Record the question's public keys while the node's token is unspent; why not, otherwise. The token is spent
   * when the node is first heard as itself (removing the enrol user at once would cut the answer's connection).
   */
  private async admit(q: EnrolQuestion, subject: string): Promise<string | null> {
    if (subject !== `mesh.enrol.${q.node}`) return `asked on ${subject} for node ${q.node}`;
    const lock = await lockMesh(this.mesh.dir);
    try {
      const record = this.mesh.node(q.node);
      if (!record) return `node ${q.node} is not in this mesh`;
      if (!record.token) return `node ${q.node} has enrolled already`;
      this.mesh.writeNode({ ...record, keys: q.keys, facts: q.facts, enrolled_at: new Date().toISOString() });
    } finally {
      lock.release();
    }
    await ensureNodeConsumer(this.bus, q.node);
    return null;
  }

  private async heard(subject: string, data: Uint8Array, kind: "report" | "heartbeat"): Promise<void> {
    const node = subject.split(".")[2] ?? "";
    const record = this.mesh.node(node);
    // a node removed is no longer read
    if (!record) return this.refusedMessage(subject, kind, "from no node of this mesh (removed?)");
    const json = parseJsonBytes(data);
    if (!json.ok) return this.refusedMessage(subject, kind, `not JSON (${json.reason})`);
    if (kind === "report") {
      const r = Report.safeParse(json.value);
      if (!r.success) return this.refusedMessage(subject, kind, "not a report this mesh reads");
      if (r.data.node !== node) return this.forged(subject, kind, r.data.node);
      heardReport(this.fleet, r.data, record);
      if (r.data.outcome === "refused") this.nodeRefused(r.data, record);
      // a report is what an operator looks for right after a push: written now, not with the next batch
      this.flushFleet();
    } else {
      const h = Heartbeat.safeParse(json.value);
      if (!h.success) return this.refusedMessage(subject, kind, "not a heartbeat this mesh reads");
      if (h.data.node !== node) return this.forged(subject, kind, h.data.node);
      heardHeartbeat(this.fleet, h.data);
    }
    this.scheduleFleet();
    if (record.token && record.enrolled_at) this.spendToken(node);
  }

  private refusedMessage(subject: string, kind: string, why: string): void {
    this.refused.say(`${kind}:${subject}`, `refused a ${kind} on ${subjectNode(subject)}'s subject: ${why}`);
  }

  /** A message on one node's subject that says it is another's: someone is writing where they should not. */
  private forged(subject: string, kind: string, claims: string): void {
    this.refused.say(
      `forged:${subject}`,
      `refused a ${kind} on ${subjectNode(subject)}'s subject that says it is from ${printable(claims, 64)}: forged or misaddressed`,
    );
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
   * The node spoke as itself: its one-time enrol user goes from every server. Batched, one reload for all the
   * nodes first heard within FLEET_WRITE_MS: a fleet enrolling at once would otherwise reload the servers once
   * a node, and a reload briefly leaves the account's JetStream API unanswered.
   */
  private spendToken(node: string): void {
    this.spent.add(node);
    this.spendTimer ??= setTimeout(() => {
      this.spendTimer = null;
      const nodes = [...this.spent];
      this.spent.clear();
      void this.spendTokens(nodes).catch((e: Error) =>
        this.warn(`cannot spend enrolment tokens: ${e.message}`),
      );
    }, FLEET_WRITE_MS);
  }

  private async spendTokens(nodes: string[]): Promise<void> {
    const lock = await lockMesh(this.mesh.dir);
    try {
      let changed = false;
      for (const node of nodes) {
        const record = this.mesh.node(node);
        if (!record?.token || !record.enrolled_at) continue;
        this.mesh.writeNode({ ...record, token: null });
        changed = true;
      }
      if (changed && !this.stopped()) await reloadUsers(this.mesh);
    } finally {
      lock.release();
    }
  }

  private scheduleFleet(): void {
    this.fleetTimer ??= setTimeout(() => {
      this.fleetTimer = null;
      this.flushFleet();
    }, FLEET_WRITE_MS);
  }

  private flushFleet(): void {
    try {
      this.mesh.writeFleet(this.fleet);
    } catch (e) {
      this.warn(`cannot write the fleet view: ${(e as Error).message}`);
    }
  }
}
