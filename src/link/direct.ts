// Direct reads (protocol.md "Direct reads"): a node with no consumer of its own reads the last declaration on its
// subject by a direct get, and is prompted to look again by the core copy of each declaration (its wake-up), or by
// a look every DECLARE_LOOK_MS, since a wake-up is lost when its route is cut. A declaration is whole state and the
// stream keeps one a subject, so the last one is all a node needs. What a consumer's ack floor kept for it, the
// settled sequence, is the caller's to keep durably (the run loop settles once the report is in the outbox).
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import {
  DECLARE_CATCH_UP_MS,
  DECLARE_CATCH_UP_TRIES,
  DECLARE_GET_TIMEOUT_MS,
  DECLARE_LOOK_MS,
  PULL_FAILURES_MAX,
  PULL_RETRY_MAX_MS,
  PULL_RETRY_MS,
} from "../defaults.ts";
import { declareDirectGet, declareSubject, type Membership } from "../vocabulary/index.ts";
import { isNoResponders, isPermissionViolation, isTimeout, messageOf } from "./failures.ts";
import type { Delivered, Settled } from "./link.ts";
import { sleep } from "./pull.ts";

/** The stream the direct get reads (the one its API subject, DECLARE_DIRECT_GET, names). */
const DECLARE_STREAM = "DECLARE";

/** Where the last settled sequence is kept: durably, by the node's store, for the mesh key the membership names. */
export interface SettledSeqs {
  /** The stream sequence of the last declaration settled, or 0. */
  last(): number;
  /** Keep `seq` as settled before returning; throws with why it could not. */
  keep(seq: number): void;
}

export interface DirectOptions {
  settled: SettledSeqs;
  /** How often to look though no wake-up came (jittered by a tenth). */
  lookMs?: number;
  getTimeoutMs?: number;
}

/** The last message on the node's subject: its stream sequence and bytes; null when there is none. */
export type Got = { seq: number; data: Uint8Array } | null;
export type DirectGet = () => Promise<Got>;

/** The direct get, on the one subject the node's user may ask it on: the subject in the API subject, no payload. */
export function directGet(nc: NatsConnection, node: string, timeout: number): DirectGet {
  const subject = declareDirectGet(node);
  return async () => {
    const m = await nc.request(subject, new Uint8Array(0), { timeout });
    const code = m.headers?.code ?? 0;
    if (code === 404) return null;
    if (code !== 0) throw new Error(`the server answered ${code} ${m.headers?.description ?? ""}`.trim());
    const seq = Number(m.headers?.get("Nats-Sequence"));
    if (!Number.isSafeInteger(seq) || seq < 1) throw new Error("the answer names no sequence");
    return { seq, data: m.data };
  };
}

/** Why a failed read ends the link, or null when it is tried again (a timeout, a cluster electing). */
export function readFailure(e: unknown, failures: number): string | null {
  if (isPermissionViolation(e))
    return `the server refused this node the direct read of its declarations (${messageOf(e)}): its user was issued for a consumer, and the membership names none; enrol again`;
  if (failures > PULL_FAILURES_MAX) {
    const said = isTimeout(e) || isNoResponders(e) ? "the server did not answer" : messageOf(e);
    return `reading declarations failed ${failures} times in a row: ${said}`;
  }
  return null;
}

/**
 * Why a membership without a consumer cannot be read directly as `node`, or null: the read is of the DECLARE
 * stream's last message on the node's own subject, and the node's user may ask for no other.
 */
export function directRefusal(membership: Membership, node: string): string | null {
  if (membership.stream !== DECLARE_STREAM)
    return `the membership names stream ${membership.stream}: a node reads its declarations from ${DECLARE_STREAM}`;
  if (membership.subject !== declareSubject(node))
    return `the membership's subject is ${membership.subject || "empty"}, not ${declareSubject(node)}: a node reads only its own`;
  return null;
}

/** The wake-ups heard since the last read: whether any came, and the newest one's bytes. */
class Wakes {
  private pending = false;
  private bytes: Uint8Array | null = null;
  private wake: (() => void) | null = null;

  heard(data: Uint8Array | null): void {
    this.pending = true;
    if (data) this.bytes = data;
    this.wake?.();
  }

  /** What the reads since the last wake-up are to catch up with, cleared for the next. */
  take(): Uint8Array | null {
    const bytes = this.bytes;
    this.pending = false;
    this.bytes = null;
    return bytes;
  }

  /** Resolves at a wake-up (at once if one came since the last take), after `ms`, or when `closed` does. */
  async wait(ms: number, closed: Promise<unknown>): Promise<void> {
    if (this.pending) return;
    await Promise.race([
      new Promise<void>((resolve) => {
        this.wake = resolve;
      }),
      sleep(ms),
      closed,
    ]);
    this.wake = null;
  }
}

const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

/**
 * The direct get again until it answers what the wake-up carried: with `allow_direct` any replica answers, and one
 * that lags the leader may still hold the previous declaration. Past the tries, what it has is taken (the next
 * look finds the newer).
 */
export async function caughtUp(
  get: DirectGet,
  wake: Uint8Array | null,
  pauseMs = DECLARE_CATCH_UP_MS,
): Promise<Got> {
  let got = await get();
  for (let tries = 0; wake && !(got && same(got.data, wake)) && tries < DECLARE_CATCH_UP_TRIES; tries++) {
    await sleep(pauseMs);
    got = await get();
  }
  return got;
}

/** The jittered look: a tenth either side, so a fleet started together does not look together. */
const jittered = (ms: number) => Math.round(ms * (0.9 + Math.random() * 0.2));

/**
 * Declarations read directly, one at a time, the next read only when the caller asks: the wake-up is subscribed
 * before the first read, so none published between the two is missed. Ends when the link closes; `close` ends it
 * saying why (a refused read, reads failing in a row).
 */
export async function* directDeclarations(
  nc: NatsConnection,
  node: string,
  opts: DirectOptions,
  close: (reason: string) => Promise<void>,
): AsyncGenerator<Delivered> {
  const wakes = new Wakes();
  // a wake-up refused or cut (its subscription closed with an error) leaves the look to find what it would have said
  const sub: Subscription = nc.subscribe(declareSubject(node), {
    callback: (e, m) => {
      if (!e) wakes.heard(m.data);
    },
  });
  const get = directGet(nc, node, opts.getTimeoutMs ?? DECLARE_GET_TIMEOUT_MS);
  const closed = nc.closed();
  let yielded = 0;
  let failures = 0;
  try {
    await nc.flush(); // the subscription is the server's before the first read
    while (!nc.isClosed()) {
      let got: Got;
      try {
        got = await caughtUp(get, wakes.take());
        failures = 0;
      } catch (e) {
        if (nc.isClosed()) return;
        const why = readFailure(e, ++failures);
        if (why) return void (await close(why));
        await sleep(Math.min(PULL_RETRY_MS * failures, PULL_RETRY_MAX_MS));
        continue;
      }
      if (got && got.seq > opts.settled.last()) {
        yield delivered(got, got.seq === yielded, opts.settled);
        yielded = got.seq;
        // settled or not, the caller has it: the next read waits for a reason to look
      }
      await wakes.wait(jittered(opts.lookMs ?? DECLARE_LOOK_MS), closed);
    }
  } finally {
    if (!nc.isClosed()) sub.unsubscribe();
  }
}

/** A declaration read directly: settling it keeps its sequence, and asks the server nothing. */
function delivered(
  got: { seq: number; data: Uint8Array },
  redelivered: boolean,
  settled: SettledSeqs,
): Delivered {
  const settle = async (): Promise<Settled> => {
    try {
      if (settled.last() < got.seq) settled.keep(got.seq);
      return { ok: true };
    } catch (e) {
      return { ok: false, reason: `declaration ${got.seq} could not be kept as settled: ${messageOf(e)}` };
    }
  };
  return {
    seq: got.seq,
    data: got.data,
    newer: null,
    claimed: 0,
    redelivered,
    working: () => {},
    ack: settle,
    term: settle,
  };
}
