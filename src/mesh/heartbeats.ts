// The fleet view's intake: heartbeats on a connection of their own, in a queue group shared by every `mesh up`
// (each heartbeat is handled once, by one controller), each node held to a budget before its message is even
// parsed; and what was heard, written to mesh-fleet at most once a node every FLEET_WRITE_MS. A node flooding its
// subject (issue: 287,500 heartbeats in 10 s) costs its own entries: the others' are read, and the server never
// finds the controller's main link (enrolments, reports, the buckets) slow, because this one is not it.
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { FLEET_WRITE_MS, HEARTBEAT_BUDGET, HEARTBEAT_WINDOW_MS, KV_CAS_TRIES } from "../defaults.ts";
import type { Heartbeat } from "../vocabulary/index.ts";
import { type Heard, heartbeatOf, merged } from "./fleet.ts";
import { heardFrom, identityOf } from "./heard.ts";
import { modify } from "./kv.ts";
import type { NodeRecord, State } from "./state.ts";

/** The queue group every controller's heartbeat subscription joins: one of them handles each heartbeat. */
export const CONTROLLERS_QUEUE = "mesh-controllers";

/** Per node, how many heartbeats were taken in the current window and how many dropped. */
export class Budget {
  private readonly windows = new Map<string, { start: number; taken: number; dropped: number }>();

  /** Whether this one is within the node's budget; counted as dropped otherwise. */
  take(node: string, now = Date.now()): boolean {
    let w = this.windows.get(node);
    if (!w || now - w.start >= HEARTBEAT_WINDOW_MS) {
      w = { start: now, taken: 0, dropped: w?.dropped ?? 0 };
      this.windows.set(node, w);
    }
    if (w.taken < HEARTBEAT_BUDGET) {
      w.taken++;
      return true;
    }
    w.dropped++;
    return false;
  }

  /** The drops counted since the last call, by node (and forgotten). */
  drained(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [node, w] of this.windows)
      if (w.dropped) {
        out.set(node, w.dropped);
        w.dropped = 0;
      }
    return out;
  }
}

/** What this controller heard and has not written yet; written coalesced, one compare-and-set a node. */
export class FleetWriter {
  private pending = new Map<string, Heard>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly state: State,
    private readonly warn: (line: string) => void,
  ) {}

  heard(node: string, heard: Heard, now = false): void {
    this.pending.set(node, joined(this.pending.get(node) ?? {}, heard));
    if (now) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLEET_WRITE_MS);
  }

  /**
   * A write that failed (its compare-and-set lost to the other controllers' every time, the bus gone): what it held
   * goes back under what was heard since, so the next write carries its counts rather than losing them.
   */
  private again(node: string, heard: Heard): void {
    // stopped: nothing will write it
    if (this.state.bus.nc.isClosed()) return;
    this.pending.set(node, joined(heard, this.pending.get(node) ?? {}));
    this.timer ??= setTimeout(() => void this.flush(), FLEET_WRITE_MS);
  }

  /** Write what is pending (after any write under way): the newer of each half wins over what is there. */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    this.pending = new Map();
    this.writing = this.writing.then(async () => {
      for (const [node, heard] of batch)
        await modify(
          this.state.fleet,
          node,
          (current) => ({ value: merged(current?.value ?? null, heard), result: undefined }),
          KV_CAS_TRIES,
        ).catch((e: Error) => {
          this.warn(`cannot write node ${node}'s fleet entry (kept for the next write): ${e.message}`);
          this.again(node, heard);
        });
    });
    await this.writing;
  }
}

/** `later` heard after `earlier`: its heartbeat and report where it has one, the counts added. */
function joined(earlier: Heard, later: Heard): Heard {
  return {
    heartbeat: later.heartbeat ?? earlier.heartbeat,
    report: later.report ?? earlier.report,
    dropped: (earlier.dropped ?? 0) + (later.dropped ?? 0),
    unverified: (earlier.unverified ?? 0) + (later.unverified ?? 0),
  };
}

/**
 * Subscribe `nc` (a connection of its own) to every node's heartbeats. `recordOf` answers from memory with a
 * node's record (its identity key): nothing per message reads a file or the bus. The budget is taken before the
 * signature is checked, so a flood costs the controller a count, not a verification, a message.
 */
export function takeHeartbeats(
  nc: NatsConnection,
  recordOf: (node: string) => NodeRecord | undefined,
  budget: Budget,
  writer: FleetWriter,
  /** Told of each heartbeat taken: the node was heard as itself, saying this. */
  spoke: (node: string, heartbeat: Heartbeat) => void,
  /** Told why a heartbeat was not taken (not of each one dropped: the budget counts those). */
  told: { refused(subject: string, why: string): void; unverified(node: string, why: string): void },
): Subscription {
  return nc.subscribe("mesh.heartbeat.>", {
    queue: CONTROLLERS_QUEUE,
    callback: (err, m) => {
      if (err) return;
      const node = m.subject.slice("mesh.heartbeat.".length);
      const record = recordOf(node);
      if (!record) return told.refused(m.subject, "from no node of this mesh (removed?)");
      if (!budget.take(node)) return writer.heard(node, { dropped: 1 });
      // a node whose enrolment this controller has not read yet (its keys are a moment behind the answer): its
      // first heartbeats are dropped unsaid and uncounted, there being no key to hold them to, nor to forge
      const identity = identityOf(record);
      if (!identity) return;
      // the node's only when signed by the key it enrolled with: anything else is dropped and counted
      const h = heardFrom(node, identity, m.data, "heartbeat");
      if (!h.ok) {
        writer.heard(node, { unverified: 1 });
        return told.unverified(node, h.reason);
      }
      writer.heard(node, { heartbeat: heartbeatOf(h.value) });
      spoke(node, h.value);
    },
  });
}
