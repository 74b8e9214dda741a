// `mesh up`: the mesh's servers in the foreground, and the controller's long-running half — answering
// enrolments, keeping the fleet view from reports and heartbeats. When one of its servers dies it stops the
// rest and exits 1 (the unit restarts it); stopped by a signal, it stops them and exits 0.
import type { JsMsg } from "@nats-io/jetstream";
import type { Subscription } from "@nats-io/transport-node";
import { ENROL_REVOKE_DELAY_MS, FLEET_WRITE_MS } from "../defaults.ts";
import {
  ENROL_CONSUMER,
  EnrolQuestion,
  Heartbeat,
  type Membership,
  parseJsonBytes,
  printable,
  REPORTS_CONSUMER,
  Report,
} from "../vocabulary/index.ts";
import { nodeUserJwt, userOfIdentity } from "./accounts.ts";
import { awaitStreams, type Bus, connectBus, ensureNodeConsumer, sweepConsumers } from "./bus.ts";
import { type Revoke, revokeOnBus } from "./claims.ts";
import { answerable, consumeLoop, membershipOf, refusedAnswer, reply, sealedAnswer } from "./controller.ts";
import { lockMesh } from "./files.ts";
import { heardHeartbeat, heardReport } from "./fleet.ts";
import { type Fleet, type MeshDir, MeshRefused, type NodeRecord } from "./layout.ts";
import { type RunningServer, runningServers, startServer, stopServer } from "./servers.ts";

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
    const running = new Controller(mesh, bus, opts.warn, () => stopped);
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
  private readonly spent: Revoke[] = [];
  private spendTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly mesh: MeshDir,
    private readonly bus: Bus,
    private readonly warn: (line: string) => void,
    private readonly stopped: () => boolean,
  ) {
    this.fleet = mesh.fleet();
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
    return true;
  }

  async stop(): Promise<void> {
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
      this.warn(`a malformed enrolment question on ${m.subject}: ignored`);
      m.ack();
      return;
    }
    const q = parsed.data;
    const admitted = await this.admit(q, m.subject);
    const answer = typeof admitted === "string" ? refusedAnswer(admitted) : sealedAnswer(q, admitted);
    if (!(await reply(this.bus.nc, q.node, q.reply, answer)))
      this.warn(
        `an enrolment question for ${q.node} names the reply ${printable(q.reply, 80)}, not its enrolment inbox: refused, unanswered`,
      );
    m.ack();
  }

  /**
   * The membership for a question asked on its own node's subject with an unspent, unexpired code — the code
   * spent at once, so a second question (a race, a replay) is refused — or why not. The answer's reply is checked
   * first: a question naming another reply spends nothing.
   */
  private async admit(q: EnrolQuestion, subject: string): Promise<Membership | string> {
    if (subject !== `mesh.enrol.${q.node}`) return `asked on ${subject} for node ${q.node}`;
    if (!answerable(q.node, q.reply)) return "not answerable";
    const user = userOfIdentity(q.keys.identity);
    if (!user) return "the identity key is not an Ed25519 public key";
    const lock = await lockMesh(this.mesh.dir);
    let spent: NonNullable<NodeRecord["enrol"]>;
    try {
      const record = this.mesh.node(q.node);
      if (!record) return `node ${q.node} is not in this mesh`;
      if (!record.enrol) return `node ${q.node} has enrolled already: its code is spent`;
      if (Date.parse(record.enrol.expires_at) <= Date.now()) return `node ${q.node}'s code has expired`;
      spent = record.enrol;
      this.mesh.writeNode({
        ...record,
        enrol: null,
        keys: q.keys,
        facts: q.facts,
        enrolled_at: new Date().toISOString(),
      });
    } finally {
      lock.release();
    }
    this.revokeLater(spent);
    await ensureNodeConsumer(this.bus, q.node);
    const config = this.mesh.config();
    return membershipOf(q.node, {
      servers: this.mesh.urls(),
      fingerprint: config.fingerprint,
      meshKey: config.mesh_key,
      jwt: nodeUserJwt(this.mesh.accountKeys(), q.node, user),
    });
  }

  /**
   * A spent code's enrolling user is revoked: batched, a moment after the answer (revoking at once would cut the
   * connection the answer is on), one push for every code spent within ENROL_REVOKE_DELAY_MS.
   */
  private revokeLater(spent: NonNullable<NodeRecord["enrol"]>): void {
    this.spent.push({
      user: spent.user,
      at: Math.ceil(Date.parse(spent.expires_at) / 1000),
      enrolling: true,
    });
    this.spendTimer ??= setTimeout(() => {
      this.spendTimer = null;
      const revoke = this.spent.splice(0);
      void revokeOnBus(this.mesh, revoke).catch((e: Error) =>
        this.warn(`cannot revoke spent enrolling users (their codes are spent all the same): ${e.message}`),
      );
    }, ENROL_REVOKE_DELAY_MS);
  }

  private async heard(subject: string, data: Uint8Array, kind: "report" | "heartbeat"): Promise<void> {
    const node = subject.split(".")[2] ?? "";
    const record = this.mesh.node(node);
    // a node removed is no longer read
    if (!record) return;
    const json = parseJsonBytes(data);
    if (!json.ok) return;
    if (kind === "report") {
      const r = Report.safeParse(json.value);
      if (!r.success || r.data.node !== node) return;
      heardReport(this.fleet, r.data, record);
      // a report is what an operator looks for right after a push: written now, not with the next batch
      this.flushFleet();
    } else {
      const h = Heartbeat.safeParse(json.value);
      if (!h.success || h.data.node !== node) return;
      heardHeartbeat(this.fleet, h.data);
    }
    this.scheduleFleet();
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
