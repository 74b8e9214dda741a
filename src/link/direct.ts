// Direct reads (protocol.md "Direct reads"): a node enrolled without a consumer of its own reads the last
// declaration on its subject by a direct get, and looks again when a new one's wake-up comes (sent once the stream
// holds it), when it dials, and every DECLARE_LOOK_MS in case a wake-up was lost (a core message is, when its
// route is cut). A declaration is whole state and the stream keeps one a node, so the last one is all there is
// to read: nothing is created on the bus, and a cluster keeps no Raft group a node.
//
// What was settled is the node's to remember (no consumer acks it): the mark of the last one settled is handed in
// at the dial and out at each settlement; only a declaration newer than it is yielded.
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import {
  DECLARE_CATCH_UP_FOR_MS,
  DECLARE_CATCH_UP_MAX_MS,
  DECLARE_CATCH_UP_MS,
  DECLARE_GET_TIMEOUT_MS,
  DECLARE_LOOK_MS,
  PULL_FAILURES_MAX,
  PULL_RETRY_MAX_MS,
  PULL_RETRY_MS,
} from "../defaults.ts";
import { flushed } from "../flushed.ts";
import { declareDirectGet, declareSubject, type StreamMark } from "../vocabulary/index.ts";
import type { Delivered, Settled } from "./delivered.ts";
import { isPermissionViolation, messageOf } from "./failures.ts";
import { sleep } from "./pull.ts";

export interface DirectOptions {
  /** How often it looks though nothing woke it (DECLARE_LOOK_MS), jittered by a tenth. */
  lookMs?: number;
  /** The declaration this node last settled from this mesh: only a newer one is yielded. */
  settled?: StreamMark | null;
  /** A declaration settled (its report is in the outbox): the caller keeps the mark, durably, before this returns. */
  onSettled?: (mark: StreamMark) => void;
}

type Got = StreamMark & { data: Uint8Array };

/** Newer than `last`: a later sequence, or a later time (a stream made anew counts from 1 again). */
export function newerThan(got: StreamMark, last: StreamMark | null): boolean {
  return !last || got.seq > last.seq || nanosOf(got.time) > nanosOf(last.time);
}

/** A server's RFC 3339 time with up to nine digits of fraction, as nanoseconds: its text does not sort. */
export function nanosOf(time: string): bigint {
  const m = /^(.*?)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(time);
  const ms = m ? Date.parse(`${m[1]}${m[3]}`) : Number.NaN;
  if (!m || Number.isNaN(ms)) return 0n;
  return BigInt(ms) * 1_000_000n + BigInt((m[2] ?? "").padEnd(9, "0"));
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(a, b) === 0;
}

export class DirectReader {
  /** The bytes of the newest wake-up the reads have not yet caught up with. */
  private wake: Uint8Array | null = null;
  private poke: (() => void) | null = null;
  private last: StreamMark | null;
  private readonly sub: Subscription;

  constructor(
    private readonly nc: NatsConnection,
    private readonly node: string,
    private readonly opts: DirectOptions,
    /** Close the link, saying why (link.ts). */
    private readonly close: (why: string) => Promise<void>,
  ) {
    this.last = opts.settled ?? null;
    this.sub = nc.subscribe(declareSubject(node), {
      callback: (err, m) => {
        if (err) {
          void this.close(`the server refused this node the wake-up of its declarations: ${messageOf(err)}`);
          return;
        }
        this.wake = m.data;
        this.poke?.();
      },
    });
    void nc.closed().then(() => this.poke?.());
  }

  /** The subscription is the server's before the first read, so no declaration falls between the two. */
  async ready(): Promise<void> {
    await flushed(this.nc, "the connection closed before the server took the subscription");
  }

  /** Newer declarations, one at a time: the next read only once the caller settled this one (or stopped). */
  async *read(): AsyncGenerator<Delivered> {
    let failures = 0;
    try {
      while (!this.nc.isClosed()) {
        let got: Got | null;
        try {
          got = await this.caughtUp();
          failures = 0;
        } catch (e) {
          if (this.nc.isClosed()) return;
          if (!(await this.bearable(e, ++failures))) return;
          await sleep(Math.min(PULL_RETRY_MS * failures, PULL_RETRY_MAX_MS));
          continue;
        }
        if (got && newerThan(got, this.last)) yield this.delivered(got);
        else await this.poked();
      }
    } finally {
      this.sub.unsubscribe();
    }
  }

  // A refused read is for good (the user's grants), closing the link saying so; a read unanswered (a cluster
  // electing, a server going) is tried again a few times, then the link closes and the run loop dials afresh.
  private async bearable(e: unknown, failures: number): Promise<boolean> {
    if (isPermissionViolation(e)) {
      await this.close(`the server refused this node the read of its declarations: ${messageOf(e)}`);
      return false;
    }
    if (failures <= PULL_FAILURES_MAX) return true;
    await this.close(`reading the last declaration failed ${failures} times in a row: ${messageOf(e)}`);
    return false;
  }

  /**
   * The last declaration, once it is the one the newest wake-up carried: the wake-up comes once the stream's leader
   * has stored it, but any replica answers a direct get, and one that lags the leader answers the one before for a
   * moment. Asked again, less often each time, for up to DECLARE_CATCH_UP_FOR_MS, then left to the next wake-up or
   * look.
   */
  private async caughtUp(): Promise<Got | null> {
    let got = await this.get();
    const until = Date.now() + DECLARE_CATCH_UP_FOR_MS;
    for (let wait = DECLARE_CATCH_UP_MS; this.wake && !this.nc.isClosed() && Date.now() < until; ) {
      if (got && sameBytes(got.data, this.wake)) break;
      await sleep(wait);
      wait = Math.min(wait * 2, DECLARE_CATCH_UP_MAX_MS);
      got = await this.get();
    }
    this.wake = null;
    return got;
  }

  private async get(): Promise<Got | null> {
    const m = await this.nc.request(declareDirectGet(this.node), new Uint8Array(0), {
      timeout: DECLARE_GET_TIMEOUT_MS,
    });
    const code = m.headers?.code ?? 0;
    // nothing declared to this node yet, or its declarations purged
    if (code === 404) return null;
    if (code !== 0) throw new Error(`the server answered ${code} ${m.headers?.description ?? ""}`.trim());
    const seq = Number(m.headers?.get("Nats-Sequence"));
    const time = m.headers?.get("Nats-Time-Stamp") ?? "";
    if (!Number.isSafeInteger(seq) || seq < 1 || !time)
      throw new Error("the server's answer names no sequence or no time");
    return { seq, time, data: m.data };
  }

  /** Until a wake-up, the next look (jittered by a tenth), or the connection's end. */
  private poked(): Promise<void> {
    if (this.wake || this.nc.isClosed()) return Promise.resolve();
    const lookMs = (this.opts.lookMs ?? DECLARE_LOOK_MS) * (0.9 + Math.random() * 0.2);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.poke = null;
        resolve();
      };
      const timer = setTimeout(done, lookMs);
      timer.unref();
      this.poke = done;
    });
  }

  private delivered(got: Got): Delivered {
    const mark: StreamMark = { seq: got.seq, time: got.time };
    const settle = async (): Promise<Settled> => {
      try {
        this.opts.onSettled?.(mark);
      } catch (e) {
        return { ok: false, reason: `declaration ${got.seq} could not be kept as settled: ${messageOf(e)}` };
      }
      this.last = mark;
      return { ok: true };
    };
    return {
      seq: got.seq,
      data: got.data,
      newer: null,
      claimed: 0,
      redelivered: false,
      working: () => {},
      ack: settle,
      term: settle,
    };
  }
}
