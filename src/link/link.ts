// The link (architecture.md): dialling the bus as the membership's user, hearing declarations from the
// consumer the mesh made, saying reports and heartbeats. It knows nothing of what a declaration means.
//
// It works under exactly the node's permissions (protocol.md): consumer info and next-message on
// DECLARE/node-<n>, acks under $JS.ACK.DECLARE.node-<n>.>, its own report/heartbeat/rekey subjects, and
// subscriptions only under _INBOX.node.<n>. So it calls no other JetStream API — no account info
// (checkAPI off), no stream info — and creates nothing: a missing consumer is the mesh's to answer.
import { createHash, type KeyObject } from "node:crypto";
import { type Consumer, type JetStreamClient, type JsMsg, jetstream } from "@nats-io/jetstream";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import {
  NEWER_LOOK_MS,
  PULL_EXPIRES_MS,
  PULL_FAILURES_MAX,
  PULL_RETRY_MAX_MS,
  PULL_RETRY_MS,
  SERVER_ACK_TIMEOUT_MS,
} from "../defaults.ts";
import {
  declareSubject,
  Heartbeat,
  heartbeatSubject,
  type Membership,
  nodeInboxPrefix,
  nodeUser,
  type Report,
  reportSubject,
  signMessage,
} from "../vocabulary/index.ts";
import type { Delivered, Sent, Settled } from "./delivered.ts";
import { type DialFailure, dial, membershipAuth } from "./dial.ts";
import { type DirectOptions, DirectReader } from "./direct.ts";
import {
  bindFailure,
  firstIssue,
  isConsumerNotFound,
  isNoResponders,
  isPermissionViolation,
  isTimeout,
  messageOf,
  missingConsumer,
  reportProblem,
} from "./failures.ts";
import { type ReleaseSource, releaseSource } from "./fetch-release.ts";
import { answerPlans, type PlanAnswer } from "./plans.ts";
import { pullOne, sleep } from "./pull.ts";

export interface LinkOptions extends DirectOptions {
  dialTimeoutMs?: number;
  /** The dial and bind together (LINK_OPEN_MS): `openBound` gives up past it. */
  openTimeoutMs?: number;
  /** Told when a server has answered the dial, before the bind: where an attempt that stops has got to. */
  onDialled?: (server: string) => void;
  /** A pull request's life; the server's idle heartbeats keep it honest meanwhile. */
  pullExpiresMs?: number;
  /** How long a report, an ack or a term waits for the server's word. */
  ackTimeoutMs?: number;
}

export type Opened =
  | { ok: true; link: Link }
  | { ok: false; kind: DialFailure | "membership" | "missing" | "refused"; reason: string };
export type Bound = { ok: true } | { ok: false; kind: "missing" | "refused" | "unreachable"; reason: string };
export type Reported = { ok: true; seq: number; duplicate: boolean } | { ok: false; reason: string };
export type { Delivered, Sent, Settled } from "./delivered.ts";
export interface Link {
  readonly node: string;
  /** The server it dialled. */
  readonly server: string;
  bind(): Promise<Bound>;
  /** Delivered messages, one at a time, the next pulled only when the caller asks; ends when the link closes. */
  declarations(): AsyncIterable<Delivered>;
  /** How many declarations wait on the consumer now (consumer info); null when it cannot be asked. */
  waiting(): Promise<number | null>;
  /** Signed by the identity key, JetStream publish to `mesh.report.<n>`, settled when the server acknowledges it. */
  report(report: Report): Promise<Reported>;
  /** Signed by the identity key, core publish to `mesh.heartbeat.<n>`: may be lost, costs nothing. */
  heartbeat(heartbeat: Heartbeat): Sent;
  /** Answer the mesh's plan requests on `mesh.plan.<n>` while the link is up (plans.ts). */
  plans(answer: (request: Uint8Array) => Promise<PlanAnswer>): void;
  /** Releases, read by direct get on the mesh's release stream (fetch-release.ts). */
  releases(): ReleaseSource;
  /** Resolves, with why, when the link closes for any reason. */
  closed(): Promise<string>;
  close(reason?: string): Promise<void>;
}

const enc = new TextEncoder();

/**
 * Dial as the membership's user, exactly as the mesh composed it, with inbox prefix `_INBOX.node.<n>`.
 * `identity`, the node's Ed25519 identity private key, signs every report, heartbeat and v2 sign-in.
 */
export async function openLink(
  membership: Membership,
  node: string,
  identity: KeyObject,
  opts: LinkOptions = {},
): Promise<Opened> {
  const refused = membershipRefusal(membership, node);
  if (refused) return { ok: false, kind: "membership", reason: refused };
  const auth = membershipAuth(membership, identity);
  if ("refused" in auth) return { ok: false, kind: "membership", reason: auth.refused };
  const dialled = await dial({
    servers: membership.servers,
    fingerprint: membership.fingerprint,
    auth,
    inboxPrefix: nodeInboxPrefix(node),
    name: membership.user,
    timeoutMs: opts.dialTimeoutMs,
  });
  if (!dialled.ok) return dialled;
  return { ok: true, link: new NatsLink(dialled.nc, dialled.server, membership, node, identity, opts) };
}

/** Why this membership cannot be dialled as `node`, or null. */
function membershipRefusal(membership: Membership, node: string): string | null {
  if (membership.transport !== "nats" && membership.transport !== "")
    return `transport "${membership.transport}" is not one this host speaks (nats)`;
  // the inbox this user may subscribe is composed from the node's name, so the two must agree
  if (membership.user !== nodeUser(node))
    return `the membership's user is ${membership.user}, not ${nodeUser(node)}`;
  return null;
}

class NatsLink implements Link {
  private readonly js: JetStreamClient;
  private consumer: Consumer | null = null;
  private direct: DirectReader | null = null;
  private closeReason: string | null = null;
  private readonly whenClosed: Promise<string>;
  private readonly ackTimeoutMs: number;

  constructor(
    private readonly nc: NatsConnection,
    readonly server: string,
    private readonly membership: Membership,
    readonly node: string,
    private readonly identity: KeyObject,
    private readonly opts: LinkOptions,
  ) {
    // jetstream() makes no API call of its own (only jetstreamManager() asks $JS.API.INFO, not ours to ask)
    this.js = jetstream(nc);
    this.ackTimeoutMs = opts.ackTimeoutMs ?? SERVER_ACK_TIMEOUT_MS;
    this.whenClosed = nc
      .closed()
      .then(
        (err) =>
          this.closeReason ??
          (err
            ? `the connection to ${server} closed: ${messageOf(err)}`
            : `the connection to ${server} closed`),
      );
  }

  closed(): Promise<string> {
    return this.whenClosed;
  }

  releases(): ReleaseSource {
    return releaseSource(this.nc);
  }

  async close(reason = "closed by the host"): Promise<void> {
    this.closeReason ??= reason;
    if (this.nc.isClosed()) return;
    // a heartbeat just published still goes out, unless the server has stopped answering
    await Promise.race([this.nc.flush().catch(() => undefined), sleep(this.ackTimeoutMs)]);
    await this.nc.close().catch(() => undefined);
  }

  async bind(): Promise<Bound> {
    const { stream, consumer, subject } = this.membership;
    if (!consumer) return this.bindDirect();
    if (!stream) return { ok: false, kind: "refused", reason: "the membership names no stream to bind" };
    if (!subject)
      return {
        ok: false,
        kind: "refused",
        reason:
          "the membership's subject is empty: a node binds by stream, consumer and subject, never to whatever a consumer delivers",
      };
    let bound: Consumer;
    try {
      bound = await this.js.consumers.get(stream, consumer);
    } catch (e) {
      return { ok: false, ...bindFailure(e, this.membership) };
    }
    const info = await bound.info(true);
    const filters = [info.config.filter_subject, ...(info.config.filter_subjects ?? [])].filter(
      (f): f is string => typeof f === "string" && f.length > 0,
    );
    if (!filters.includes(subject))
      return {
        ok: false,
        kind: "refused",
        reason: `consumer ${consumer} on ${stream} delivers ${filters.join(", ") || "every subject"}, not ${subject}`,
      };
    if (info.config.ack_policy !== "explicit")
      return {
        ok: false,
        kind: "refused",
        reason: `consumer ${consumer} on ${stream} does not take explicit acks (${info.config.ack_policy}): a declaration could be lost`,
      };
    this.consumer = bound;
    return { ok: true };
  }

  /** A membership without a consumer: the node reads its own subject's last declaration (direct.ts). */
  private async bindDirect(): Promise<Bound> {
    const { stream, subject } = this.membership;
    const own = declareSubject(this.node);
    if (stream !== "DECLARE" || subject !== own)
      return {
        ok: false,
        kind: "refused",
        reason: `the membership reads ${stream || "no stream"}/${subject || "no subject"}: a node without a consumer reads DECLARE/${own}, its own`,
      };
    const direct = new DirectReader(this.nc, this.node, this.opts, (why) => this.close(why));
    try {
      await direct.ready();
    } catch (e) {
      return {
        ok: false,
        kind: "unreachable",
        reason: `the server did not take the wake-up's subscription: ${messageOf(e)}`,
      };
    }
    this.direct = direct;
    return { ok: true };
  }

  private missing(): string {
    return missingConsumer(this.membership);
  }

  async waiting(): Promise<number | null> {
    if (!this.consumer) return null;
    try {
      return (await this.consumer.info()).num_pending;
    } catch {
      return null;
    }
  }

  declarations(): AsyncIterable<Delivered> {
    if (this.direct) return this.direct.read();
    if (!this.consumer) throw new Error("bind() the link before hearing declarations");
    return this.pull(this.consumer);
  }

  // One message per pull, the next pulled only when the caller asks for it, but for the look behind one the
  // server says others wait behind (NEWER_LOOK_MS): what that finds is held and handed over next.
  private async *pull(consumer: Consumer): AsyncGenerator<Delivered> {
    const expires = this.opts.pullExpiresMs ?? PULL_EXPIRES_MS;
    let failures = 0;
    let ahead: JsMsg | null = null;
    try {
      while (!this.nc.isClosed()) {
        try {
          const m: JsMsg | null = ahead ?? (await pullOne(consumer, expires));
          ahead = null;
          if (!m) continue;
          failures = 0;
          const claimed = Math.max(m.info.pending, (await this.waiting()) ?? 0);
          ahead = claimed > 0 ? await pullOne(consumer, NEWER_LOOK_MS).catch(() => null) : null;
          yield this.delivered(m, claimed, ahead && ahead.seq > m.seq ? ahead.seq : null);
        } catch (e) {
          if (this.nc.isClosed()) return;
          failures++;
          if (!(await this.stillThere(e, failures))) return;
          await sleep(Math.min(PULL_RETRY_MS * failures, PULL_RETRY_MAX_MS));
        }
      }
    } finally {
      // the caller stopped hearing (an upgrade, a move): one held behind is handed back now, not at ack_wait
      if (ahead && !this.nc.isClosed()) (ahead as JsMsg).nak();
    }
  }

  // A pull that failed: gone for good (the consumer was deleted) closes the link saying so; a pull that
  // only missed heartbeats is tried again while the consumer still answers, a few times, then the link
  // is closed so the run loop dials afresh.
  private async stillThere(e: unknown, failures: number): Promise<boolean> {
    if (isConsumerNotFound(e)) {
      await this.close(this.missing());
      return false;
    }
    if (failures > PULL_FAILURES_MAX) {
      await this.close(`pulling declarations failed ${failures} times in a row: ${messageOf(e)}`);
      return false;
    }
    try {
      await this.consumer?.info();
      return true;
    } catch (infoError) {
      await this.close(
        isConsumerNotFound(infoError)
          ? this.missing()
          : `the server stopped serving declarations: ${messageOf(e)}; then ${messageOf(infoError)}`,
      );
      return false;
    }
  }

  private delivered(m: JsMsg, claimed: number, newer: number | null): Delivered {
    // JsMsg's interface leaves out the reply subject its class carries: read through an 'in' check, not a cast
    const reply = "reply" in m && typeof m.reply === "string" ? m.reply : "";
    let settled = false;
    const settle = async (payload: string, what: string): Promise<Settled> => {
      if (settled) return { ok: true };
      settled = true;
      try {
        // a request, not a publish: the server answers an ack that carries a reply, so this resolves
        // only once the settlement is the server's
        await this.nc.request(reply, enc.encode(payload), { timeout: this.ackTimeoutMs });
        return { ok: true };
      } catch (e) {
        settled = false;
        return {
          ok: false,
          reason: `the server did not confirm the ${what} of declaration ${m.seq}: ${messageOf(e)}`,
        };
      }
    };
    return {
      seq: m.seq,
      data: m.data,
      newer,
      claimed,
      redelivered: m.redelivered,
      working: () => {
        if (!settled && !this.nc.isClosed()) m.working();
      },
      ack: () => settle("+ACK", "ack"),
      term: () => settle("+TERM", "term"),
    };
  }

  async report(report: Report): Promise<Reported> {
    const problem = reportProblem(report, this.node);
    if (problem) return { ok: false, reason: problem };
    // signed as it is sent, not as it is kept: the outbox holds what the node said, and the key that signs it is
    // the one the node holds now. Ed25519 is deterministic, so a retry sends the same bytes.
    const data = enc.encode(JSON.stringify(signMessage(report, this.identity)));
    const subject = reportSubject(this.node);
    const h = headers();
    // the same bytes sent again (an outbox retry after a lost ack) are one message to the stream
    h.set("Nats-Msg-Id", createHash("sha256").update(data).digest("hex"));
    try {
      const ack = await this.js.publish(subject, data, { headers: h, timeout: this.ackTimeoutMs });
      return { ok: true, seq: ack.seq, duplicate: ack.duplicate };
    } catch (e) {
      if (isNoResponders(e))
        return {
          ok: false,
          // also what a replicated stream answers while it elects a new leader
          reason: `no stream answered for ${subject}: the mesh's REPORTS stream is missing or changing leader`,
        };
      if (isPermissionViolation(e))
        return { ok: false, reason: `the server refused the report: ${messageOf(e)}` };
      if (isTimeout(e))
        return {
          ok: false,
          reason: `the server did not acknowledge the report within ${this.ackTimeoutMs} ms`,
        };
      return { ok: false, reason: `the report was not acknowledged: ${messageOf(e)}` };
    }
  }

  plans(answer: (request: Uint8Array) => Promise<PlanAnswer>): void {
    answerPlans(this.nc, this.node, this.identity, answer);
  }

  heartbeat(heartbeat: Heartbeat): Sent {
    const parsed = Heartbeat.safeParse(heartbeat);
    if (!parsed.success)
      return { ok: false, reason: `the heartbeat is malformed: ${firstIssue(parsed.error)}` };
    if (parsed.data.node !== this.node)
      return { ok: false, reason: `the heartbeat is for node ${parsed.data.node}, not ${this.node}` };
    try {
      this.nc.publish(heartbeatSubject(this.node), JSON.stringify(signMessage(parsed.data, this.identity)));
      return { ok: true };
    } catch (e) {
      return { ok: false, reason: `the heartbeat was not sent: ${messageOf(e)}` };
    }
  }
}
