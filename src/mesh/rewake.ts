// A node behind its last push, woken again (protocol.md "Direct reads"). A wake-up is a core message: one crossing
// a server that dies is lost, and a node that dials a restarted server is answered by its replica of DECLARE, which
// serves direct gets once it is 90% caught up (nats-server), so the read at the dial can find the declaration
// before. Either way the node would wait for its next look (DECLARE_LOOK_MS, 5 min). The controller hears every
// heartbeat, and a heartbeat names the last declaration the node applied: one that goes on naming an older one than
// the node's last push is sent that push's wake-up again, with the bytes the stream's leader holds, so its read is
// asked again until a replica answers them.
import { REWAKE_AFTER_MS, REWAKE_TRIES } from "../defaults.ts";
import { declareSubject, type Heartbeat } from "../vocabulary/index.ts";
import { type Bus, jsCall } from "./bus.ts";
import type { NodeRecord } from "./state.ts";
import { wakeNode } from "./wake.ts";

/** Where a node behind stands: the serial it is behind, since when, and how often it was woken for it. */
interface Behind {
  serial: number;
  since: number;
  woken: number;
  lastWoken: number;
}

export class Rewakes {
  private readonly behind = new Map<string, Behind>();
  private readonly asking = new Set<string>();

  constructor(
    private readonly bus: Pick<Bus, "nc" | "jsm">,
    /** Told of each node woken again: its serial, and the stream sequence its heartbeat named. */
    private readonly woke: (node: string, serial: number, heard: number | null) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * A heartbeat the node signed: compared with its record's last push, a wake-up sent when it stays behind.
   * Resolves once any wake-up it sent is out (the controller does not wait for it).
   */
  async heard(node: string, heartbeat: Heartbeat, record: NodeRecord): Promise<void> {
    const last = record.pushes.at(-1);
    const heard = heartbeat.last?.seq ?? null;
    if (!last || record.moved_to !== null || (last.seq !== null && heard === last.seq)) {
      this.behind.delete(node);
      return;
    }
    const now = this.now();
    const was = this.behind.get(node);
    const b: Behind =
      was?.serial === last.serial ? was : { serial: last.serial, since: now, woken: 0, lastWoken: 0 };
    this.behind.set(node, b);
    // behind this push since a heartbeat heard after it: a node still applying, or one that read it a moment
    // after this heartbeat, is not woken
    const due = now - b.since >= REWAKE_AFTER_MS && now - b.lastWoken >= REWAKE_AFTER_MS;
    if (!due || b.woken >= REWAKE_TRIES || this.asking.has(node)) return;
    b.woken++;
    b.lastWoken = now;
    this.asking.add(node);
    await this.wake(node, b, heard).finally(() => this.asking.delete(node));
  }

  /**
   * The last declaration on the node's subject, from the stream's leader (a direct get could be answered by the
   * very replica that is behind); a node whose heartbeat names it is not behind after all (a push whose sequence
   * was never recorded) and is not woken.
   */
  private async wake(node: string, b: Behind, heard: number | null): Promise<void> {
    const stored = await jsCall(() =>
      this.bus.jsm.streams.getMessage("DECLARE", { last_by_subj: declareSubject(node) }),
    ).catch(() => null);
    if (!stored || stored.seq === heard) return;
    wakeNode(this.bus, node, stored.data);
    this.woke(node, b.serial, heard);
  }
}
