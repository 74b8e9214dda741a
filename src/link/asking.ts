// Enrolment (protocol.md "Enrolment"): one conversation — connect with the code's credential, ask, wait for the answer.
// Its own seam rather than part of the link: the credential is a one-time secret, there is no declaration
// to hear, and a node that fails here is not in the mesh at all.
//
// The question goes through JetStream publish, not core: the enrol user may subscribe `_INBOX.enrol.<n>.>`,
// so the stream's PubAck can come back to it, and a bus whose ENROL stream is missing says so at once
// ("no responders") instead of leaving the node to wait out the timeout for a question nobody kept.
// The credential is the enrolling user's JWT and its key's seed (v2), or the enrol user's password (v1, a mesh
// made before): no reason composed here quotes either, and the dial scrubs a password.
// The answer's membership comes sealed to the sealing key the question carried: whoever else holds the code
// can listen on the inbox too, and must read nothing of use there. An answer in clear is refused.
import { type KeyObject, randomBytes } from "node:crypto";
import { jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  ENROL_ACK_PATIENCE_MS,
  ENROL_ASK_AGAIN_MS,
  ENROL_TIMEOUT_MS,
  SERVER_ACK_TIMEOUT_MS,
} from "../defaults.ts";
import {
  EnrolAnswer,
  EnrolQuestion,
  enrolInboxPrefix,
  enrolSubject,
  enrolUser,
  keyPairOfSeed,
  Membership,
  nodeUser,
  unseal,
} from "../vocabulary/index.ts";
import { type DialAuth, type DialFailure, dial } from "./dial.ts";
import { isCredentialRefused, isNoResponders, isPermissionViolation, messageOf } from "./failures.ts";

/** Where (servers), which certificate (fingerprint), which bus (transport): what the code carries but the token. */
export interface Approach {
  servers: string[];
  fingerprint: string;
  transport: string;
}

export interface Asking {
  node: string;
  /** The code's credential: v2 the enrolling user's JWT and the seed of its key; v1 the enrol user's password. */
  credential: { jwt: string; seed: string } | { token: string };
  /** Each public key as standard base64 of its raw 32 bytes (store's publicKeys()); never a private key. */
  keys: { identity: string; sealing: string; overlay: string };
  /** The private half of `keys.sealing`: the answer's membership is sealed to it. */
  sealing: KeyObject;
  facts: EnrolQuestion["facts"];
  /** Only when a WireGuard interface was found and taken (overlay.md). */
  tunnel?: NonNullable<EnrolQuestion["tunnel"]>;
}

export interface AskOptions {
  /** How long the answer is waited for once the question is asked. */
  timeoutMs?: number;
  dialTimeoutMs?: number;
}

export type Answered =
  | { ok: true; membership: Membership }
  | { ok: false; reason: string; kind: DialFailure | "refused" | "timeout" | "protocol" };

const TRANSPORTS = ["nats", ""];

export async function ask(approach: Approach, asking: Asking, opts: AskOptions = {}): Promise<Answered> {
  if (!TRANSPORTS.includes(approach.transport))
    return {
      ok: false,
      kind: "protocol",
      reason: `transport "${approach.transport}" is not one this host speaks (nats)`,
    };
  const auth = enrolAuth(asking);
  if (!auth)
    return { ok: false, kind: "protocol", reason: "the enrolment code's seed is not a user nkey seed" };
  const dialled = await dial({
    servers: approach.servers,
    fingerprint: approach.fingerprint,
    auth,
    inboxPrefix: enrolInboxPrefix(asking.node),
    name: enrolUser(asking.node),
    timeoutMs: opts.dialTimeoutMs,
  });
  if (!dialled.ok) {
    const hint =
      dialled.kind === "auth"
        ? ": the enrolment code is wrong, already used, expired or withdrawn; ask the operator for a new one"
        : "";
    return { ok: false, kind: dialled.kind, reason: `cannot enrol: ${dialled.reason}${hint}` };
  }
  try {
    const answered = await converse(dialled.nc, asking, opts.timeoutMs ?? ENROL_TIMEOUT_MS);
    return answered.ok ? answered : ((await withdrawn(dialled.nc, asking.node)) ?? answered);
  } finally {
    await dialled.nc.close().catch(() => undefined);
  }
}

/**
 * The bus cut the enrolling user while it asked (its code spent by an enrolment a moment before, whose user the
 * controller revokes just after): a refusal of the code, said as one, not an unreachable bus.
 */
async function withdrawn(nc: NatsConnection, node: string): Promise<Answered | null> {
  if (!nc.isClosed()) return null;
  const why = await nc.closed();
  if (!why || !isCredentialRefused(why)) return null;
  return {
    ok: false,
    kind: "auth",
    reason: `cannot enrol: the bus withdrew ${enrolUser(node)}'s credentials while it asked: the enrolment code is wrong, already used, expired or withdrawn; ask the operator for a new one`,
  };
}

function enrolAuth(asking: Asking): DialAuth | null {
  const user = enrolUser(asking.node);
  const c = asking.credential;
  if ("token" in c) return { kind: "password", user, password: c.token };
  const pair = keyPairOfSeed("user", c.seed);
  return pair ? { kind: "jwt", user, jwt: c.jwt, key: pair.privateKey } : null;
}

async function converse(nc: NatsConnection, asking: Asking, timeoutMs: number): Promise<Answered> {
  // a fresh tail per attempt: an answer left over from an attempt that timed out is not this one's
  const reply = `${enrolInboxPrefix(asking.node)}.${randomBytes(12).toString("hex")}`;
  // subscribed before anything is published, so the answer cannot arrive to nobody
  const sub = nc.subscribe(reply, { max: 1 });
  const answer = (async () => {
    for await (const m of sub) return m.data;
    return null;
  })().catch((e: Error) => e);
  const question = EnrolQuestion.safeParse({
    v: 1,
    node: asking.node,
    reply,
    keys: asking.keys,
    facts: asking.facts,
    ...(asking.tunnel ? { tunnel: asking.tunnel } : {}),
  });
  if (!question.success)
    return {
      ok: false,
      kind: "protocol",
      reason: `the enrolment question is malformed: ${question.error.issues[0]?.message}`,
    };
  const asked = await acknowledged(nc, asking.node, JSON.stringify(question.data));
  if (!asked.ok) return asked;
  const got = await answerOrTimeout(nc, asking.node, JSON.stringify(question.data), answer, timeoutMs);
  sub.unsubscribe();
  if (got === "timeout")
    return {
      ok: false,
      kind: "timeout",
      reason: `the mesh did not answer within ${duration(timeoutMs)} (the question was kept as ENROL message ${asked.seq}): is the controller running?`,
    };
  if (got instanceof Error)
    return { ok: false, kind: "protocol", reason: `waiting for the answer failed: ${got.message}` };
  if (got === null)
    return { ok: false, kind: "unreachable", reason: "the connection closed before the mesh answered" };
  return answerOf(got, asking);
}

/**
 * The answer, asking again every ENROL_ASK_AGAIN_MS until it comes or `timeoutMs` is spent. An answer crossing
 * from the mesh's account while the servers take the nodes' account's new claims (a revocation pushed for another
 * node's spent code) can be lost; the same question asked again is answered again (the code is spent to these
 * keys), well before the controller revokes this code's user (ENROL_REVOKE_DELAY_MS after its first answer).
 */
async function answerOrTimeout(
  nc: NatsConnection,
  node: string,
  question: string,
  answer: Promise<Uint8Array | null | Error>,
  timeoutMs: number,
): Promise<Uint8Array | null | Error | "timeout"> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // never below 0: a question asked again can take past the deadline, and Node warns of a negative timer on stderr
    const wait = Math.max(0, Math.min(ENROL_ASK_AGAIN_MS, deadline - Date.now()));
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<"waited">((resolve) => {
      timer = setTimeout(() => resolve("waited"), wait);
    });
    const got = await Promise.race([answer, waited]);
    clearTimeout(timer);
    if (got !== "waited") return got;
    if (Date.now() >= deadline) return "timeout";
    // a question that cannot be asked again is still waited on: the first may yet be answered
    await publish(nc, node, question);
  }
}

/** The first question, asked again while the bus leaves it unacknowledged, for up to ENROL_ACK_PATIENCE_MS. */
async function acknowledged(nc: NatsConnection, node: string, question: string): Promise<Asked> {
  const deadline = Date.now() + ENROL_ACK_PATIENCE_MS;
  for (;;) {
    const tried = Date.now();
    const asked = await publish(nc, node, question);
    if (asked.ok || !(asked.kind === "unreachable" || asked.again) || nc.isClosed() || Date.now() >= deadline)
      return asked;
    // a refusal that came at once is not asked again at once
    const pause = ENROL_ASK_AGAIN_MS - (Date.now() - tried);
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
  }
}

type Asked =
  | { ok: true; seq: number }
  /** `again`: said as it stands once the patience is spent, but asked again until then. */
  | { ok: false; kind: "protocol" | "unreachable"; reason: string; again?: true };

async function publish(nc: NatsConnection, node: string, question: string): Promise<Asked> {
  // jetstream() makes no API call of its own: the enrol user may publish its question and nothing else
  const js = jetstream(nc);
  try {
    const ack = await js.publish(enrolSubject(node), question, { timeout: SERVER_ACK_TIMEOUT_MS });
    return { ok: true, seq: ack.seq };
  } catch (e) {
    // a cluster answered so once in 2,000 enrolments under load, its ENROL stream kept and led: asked again
    if (isNoResponders(e))
      return {
        ok: false,
        kind: "protocol",
        again: true,
        reason: `no stream on this bus keeps ${enrolSubject(node)}: the mesh is not taking enrolments here`,
      };
    if (isPermissionViolation(e))
      return { ok: false, kind: "protocol", reason: `the server refused the question: ${messageOf(e)}` };
    // across the bus's accounts a missing ENROL stream is no "no responders": the question is just not acknowledged
    return {
      ok: false,
      kind: "unreachable",
      reason: `the question was not acknowledged (${messageOf(e)}): is the mesh taking enrolments here?`,
    };
  }
}

function answerOf(data: Uint8Array, asking: Asking): Answered {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
  } catch {
    return protocol("the mesh's answer is not UTF-8 JSON");
  }
  const membership = (json as { membership?: unknown } | null)?.membership;
  if (membership !== null && typeof membership === "object")
    return protocol(
      "the mesh's answer carries the membership in clear: refused, it must come sealed to this node",
    );
  const parsed = EnrolAnswer.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return protocol(
      `the mesh's answer is not an enrolment answer: ${issue?.path.join(".") || "answer"} ${issue?.message}`,
    );
  }
  const answer = parsed.data;
  if (!answer.ok)
    return { ok: false, kind: "refused", reason: `the mesh refused the enrolment: ${answer.reason}` };
  const opened = openMembership(answer.membership, asking.sealing);
  if (!opened.ok) return protocol(`the mesh's answer: the membership ${opened.reason}`);
  if (opened.membership.user !== nodeUser(asking.node))
    return protocol(
      `the mesh's membership names user ${opened.membership.user}, not ${nodeUser(asking.node)}`,
    );
  return { ok: true, membership: opened.membership };
}

type Opened = { ok: true; membership: Membership } | { ok: false; reason: string };

/** The sealed membership, unsealed with this question's key and held to the schema; no reason quotes it. */
function openMembership(sealed: string, sealing: KeyObject): Opened {
  const bytes = unseal(sealed, sealing);
  if (!bytes.ok) return { ok: false, reason: `is ${bytes.reason}` };
  let json: unknown;
  try {
    json = JSON.parse(bytes.bytes.toString("utf8"));
  } catch {
    return { ok: false, reason: "does not unseal to JSON" };
  }
  const parsed = Membership.safeParse(json);
  if (!parsed.success)
    return {
      ok: false,
      reason: `is not a membership (${parsed.error.issues[0]?.path.join(".") || "shape"})`,
    };
  return { ok: true, membership: parsed.data };
}

function protocol(reason: string): Answered {
  return { ok: false, kind: "protocol", reason };
}

function duration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}
