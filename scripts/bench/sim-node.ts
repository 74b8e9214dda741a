// One simulated node for `bench:fleet --simulated N`: everything a node says on the bus, through the node's own
// code (src/link for enrolment, the pinned TLS dial, the consumer, signed reports and heartbeats; the vocabulary
// for the code, the envelope and its checks), with nothing done to a machine: a declaration that verifies is
// reported applied, each resource "created". Thousands live in one process, so it keeps only what the bus needs:
// its keys, its membership, its last serial, and an outbox of reports not yet acknowledged.
import type { KeyObject } from "node:crypto";
import { ask, type Delivered, type Link, openBound } from "../../src/link/index.ts";
import { backoffMs } from "../../src/run/index.ts";
import { makeKeyPair, makeOverlayKey, type NodeKeys, publicKeys } from "../../src/store/index.ts";
import {
  decodeCode,
  type Membership,
  type Report,
  type StreamMark,
  verifyEnvelope,
} from "../../src/vocabulary/index.ts";

const VERSION = "sim";
/** What the mesh's redial window is for a real node (REDIAL_SPREAD_S): the simulated fleet spreads as it does. */
const REDIAL_SPREAD_MS = 10_000;
/**
 * How many of the thread's nodes dial at once. A real node does its own handshake on its own CPU; here one thread
 * does them all, and 10,000 nodes redialling a cluster's other servers together each took longer than the
 * servers' 2 s TLS handshake timeout: every dial was cut, none got in, in ten minutes, the servers idle. A dial
 * waits its turn instead, so what a restart's figure adds is the simulator's queue, never a dial lost to it.
 */
export const DIALS_AT_ONCE = 64;

export interface SimOptions {
  heartbeatS: number;
  /** Told each time a link comes up (the time, for reconnects per second). */
  onUp?: (node: string, at: number) => void;
}

/** An enrolment that failed, and how (asking.ts's kinds): a bench asks again what a person would. */
export class EnrolFailed extends Error {
  constructor(
    message: string,
    readonly kind: string,
  ) {
    super(message);
  }
}

export class SimNode {
  private link: Link | null = null;
  /** The server its link is on now; null while it has none. */
  get server(): string | null {
    return this.link?.server ?? null;
  }
  /** When its link last came up (0: never). */
  linkedAt = 0;
  /** Why its last dial or bind failed, while it has no link: what the bench says when a node is never heard. */
  failure: string | null = null;
  private stopped = false;
  private lastSerial = 0;
  /** The last declaration it settled (link/direct.ts): only a newer one is read again after a dial. */
  private settled: StreamMark | null = null;
  private lastApplied: { seq: number; at: string } | null = null;
  /** When it last took a declaration that verified, and when the server acknowledged that one's report: a push's stages. */
  took: { digest: string; at: number } | null = null;
  acked: { digest: string; at: number } | null = null;
  private readonly outbox: Report[] = [];
  /** Reports taken and not yet acknowledged by the server: what a report not heard is waiting in. */
  get waiting(): number {
    return this.outbox.length;
  }
  /** The serial of the last declaration it took. */
  get serial(): number {
    return this.lastSerial;
  }
  private readonly started = Date.now();
  private loop: Promise<void> = Promise.resolve();
  /** The outbox's sends, one after another: a heartbeat's and a declaration's never send one report twice. */
  private flushing: Promise<void> = Promise.resolve();

  private constructor(
    readonly name: string,
    private readonly identity: KeyObject,
    private readonly identityB64: string,
    private readonly membership: Membership,
  ) {}

  /** A node's keys, made once: an enrolment asked again asks with them, as a node's state directory keeps them. */
  static keys(): NodeKeys {
    return { identity: makeKeyPair("ed25519"), sealing: makeKeyPair("x25519"), overlay: makeOverlayKey() };
  }

  /** Real enrolment: the code's credential dials, the question is asked, the sealed membership opened. */
  static async enrol(code: string, keys: NodeKeys = SimNode.keys()): Promise<SimNode> {
    const decoded = decodeCode(code);
    if (!decoded.ok) throw new Error(decoded.reason);
    const c = decoded.value;
    if (!("jwt" in c)) throw new Error(`the code for ${c.node} is a v1 code (a password): not this mesh's`);
    const pub = publicKeys(keys);
    const answer = await ask(
      { servers: c.servers, fingerprint: c.fingerprint, transport: c.transport },
      {
        node: c.node,
        credential: { jwt: c.jwt, seed: c.seed },
        keys: pub,
        sealing: keys.sealing.privateKey,
        facts: { os: "linux", arch: "x64", hostname: c.node, version: VERSION },
      },
    );
    if (!answer.ok) throw new EnrolFailed(`enrol ${c.node}: ${answer.reason}`, answer.kind);
    return new SimNode(c.node, keys.identity.privateKey, pub.identity, answer.membership);
  }

  /** Dial and hold the link, dialling again with the hold's own backoff whenever it is lost. */
  start(opts: SimOptions): void {
    this.loop = this.dialLoop(opts);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.link?.close().catch(() => undefined);
    await this.loop;
  }

  private async dialLoop(opts: SimOptions): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      await sleep(backoffMs(attempt, Math.random, REDIAL_SPREAD_MS));
      if (this.stopped) return;
      // read directly, as a node enrolled now does: what it settled is kept across its links, as settled.json is
      const marks = {
        settled: this.settled,
        onSettled: (m: StreamMark) => {
          this.settled = m;
        },
      };
      await dialTurns.take();
      const opened = await openBound(this.membership, this.name, this.identity, marks)
        .catch((e: Error) => ({ ok: false as const, reason: e.message }))
        .finally(() => dialTurns.give());
      attempt++;
      if (!opened.ok) {
        this.failure = opened.reason;
        continue;
      }
      this.failure = null;
      attempt = 1;
      this.link = opened.link;
      this.linkedAt = Date.now();
      opts.onUp?.(this.name, this.linkedAt);
      await this.hold(opened.link, opts.heartbeatS).catch(() => undefined);
      await opened.link.close().catch(() => undefined);
      this.link = null;
    }
  }

  /** One link's life: what waited in the outbox, a heartbeat now and on a timer, declarations as they come. */
  private async hold(link: Link, heartbeatS: number): Promise<void> {
    await this.flush(link);
    this.beat(link);
    // each node's timer in its own phase, as a fleet's are
    const timer = setInterval(() => this.beat(link), heartbeatS * 1000);
    try {
      for await (const d of link.declarations()) {
        if (this.stopped) return;
        await this.take(link, d);
      }
    } finally {
      clearInterval(timer);
    }
  }

  private beat(link: Link): void {
    // as the node's run loop does: a report the bus did not take (an ack lost as a server died) waits no longer
    // than a heartbeat while the link holds, not for the next link, which a node never cut never has
    if (this.outbox.length) void this.flush(link);
    link.heartbeat({
      v: 1,
      node: this.name,
      at: new Date().toISOString(),
      version: VERSION,
      uptime_s: Math.floor((Date.now() - this.started) / 1000),
      last: this.lastApplied ? { ...this.lastApplied, outcome: "applied" } : null,
      confirmed: true,
    });
  }

  /** A delivery verified as the node verifies it; its report kept before the delivery is settled, as the outbox does. */
  private async take(link: Link, d: Delivered): Promise<void> {
    const v = verifyEnvelope(d.data, {
      meshKey: this.membership.mesh_key,
      node: this.name,
      identity: this.identityB64,
    });
    // a mesh's declaration always carries its serial; one without is refused as the node refuses it
    const serial = v.ok ? (v.declaration.serial ?? 0) : 0;
    if (!v.ok || serial <= this.lastSerial || d.newer !== null) {
      await d.term();
      return;
    }
    this.lastSerial = serial;
    this.took = { digest: v.digest, at: Date.now() };
    const at = new Date().toISOString();
    this.outbox.push({
      v: 1,
      node: this.name,
      declaration: { seq: d.seq, digest: v.digest },
      outcome: "applied",
      started_at: at,
      finished_at: at,
      steps: v.declaration.resources.map((r) => ({ id: r.id, type: r.type, did: "created", detail: "" })),
      holds: [],
      refusals: [],
      host: { version: VERSION, os: "linux" },
    });
    this.lastApplied = { seq: d.seq, at };
    await d.ack();
    await this.flush(link);
  }

  /** Every report the server has not acknowledged, oldest first; what fails waits for the next heartbeat or link. */
  private flush(link: Link): Promise<void> {
    this.flushing = this.flushing.then(() => this.sendWaiting(link)).catch(() => undefined);
    return this.flushing;
  }

  private async sendWaiting(link: Link): Promise<void> {
    while (this.outbox.length) {
      const sent = await link.report(this.outbox[0]!);
      if (!sent.ok) return;
      this.acked = { digest: this.outbox.shift()!.declaration.digest, at: Date.now() };
    }
  }
}

/** Turns to dial, shared by every node in the thread, taken in the order asked. */
class Turns {
  private readonly waiting: (() => void)[] = [];
  constructor(private free: number) {}

  async take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((r) => this.waiting.push(r));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

const dialTurns = new Turns(DIALS_AT_ONCE);

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve();
}
