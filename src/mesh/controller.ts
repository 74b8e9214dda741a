// The controller's half of the protocol, said once: the membership a node is given, the enrolment answer
// sealed to the key the question carried, and a stream read through a durable that survives a restart.
// `mesh up` runs it; the test double in test/mesh/ uses it too.
import type { JsMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { CONSUME_RETRY_MS, SHARED_PULL_BATCH, SHARED_PULL_EXPIRES_MS } from "../defaults.ts";
import { flushed } from "../flushed.ts";
import {
  declareSubject,
  type EnrolQuestion,
  enrolInboxPrefix,
  type Membership,
  nodeConsumer,
  nodeUser,
  seal,
} from "../vocabulary/index.ts";
import type { Bus } from "./bus.ts";
import type { Reads } from "./permissions.ts";

export interface MembershipParts {
  servers: string[];
  fingerprint: string;
  meshKey: string;
  /** The node's user JWT, issued for its identity key (accounts.ts). */
  jwt: string;
  /** How it reads (permissions.ts): a node enrolled before direct reads keeps its consumer. Absent: directly. */
  reads?: Reads;
}

export function membershipOf(node: string, parts: MembershipParts): Membership {
  return {
    transport: "nats",
    servers: parts.servers,
    fingerprint: parts.fingerprint,
    user: nodeUser(node),
    jwt: parts.jwt,
    // no consumer: the node reads its last declaration directly (protocol.md "Direct reads")
    stream: "DECLARE",
    ...(parts.reads === "consumer" ? { consumer: nodeConsumer(node) } : {}),
    subject: declareSubject(node),
    mesh_key: parts.meshKey,
  };
}

/**
 * `{v:1, ok:true, membership:"v1:…"}`: the membership sealed to the sealing key of the question. The answer
 * is a core message on `_INBOX.enrol.<n>.>`, where whoever holds the token may listen too.
 */
export function sealedAnswer(question: EnrolQuestion, membership: Membership): object {
  return { v: 1, ok: true, membership: seal(Buffer.from(JSON.stringify(membership)), question.keys.sealing) };
}

export function refusedAnswer(reason: string): object {
  return { v: 1, ok: false, reason };
}

/**
 * The answer goes to the address in the payload (the message's own reply field is the consumer's ack address),
 * and only when that address is the node's enrolment inbox: `_INBOX.enrol.<n>.` and a tail of its own. Any other
 * is refused, said by the caller: the controller publishes with MESH's rights, and a question naming the JetStream
 * API, another node's subject or a stream would have it act there.
 */
export function answerable(node: string, address: string): boolean {
  const prefix = `${enrolInboxPrefix(node)}.`;
  return address.startsWith(prefix) && /^[A-Za-z0-9_-]{1,64}$/.test(address.slice(prefix.length));
}

/** Publish the answer where the question said, if that is answerable (false, and nothing sent, otherwise). */
export async function reply(
  nc: NatsConnection,
  node: string,
  address: string,
  answer: object,
): Promise<boolean> {
  if (!answerable(node, address)) return false;
  nc.publish(address, JSON.stringify(answer));
  await flushed(nc, "the connection to the bus closed before the bus confirmed the answer");
  return true;
}

/**
 * Read a stream through a durable until `stopped()`. A consumer that could not be reached, or a consume that
 * ended (missed heartbeats on a busy machine, a server restart), is taken up again: a loop that died silently
 * once left a whole test file's enrolments unanswered.
 */
export async function consumeLoop(
  bus: Bus,
  stream: string,
  durable: string,
  handle: (m: JsMsg) => Promise<void>,
  stopped: () => boolean,
  warn: (line: string) => void,
): Promise<void> {
  let said = false;
  while (!stopped()) {
    try {
      const consumer = await bus.js.consumers.get(stream, durable);
      said = false;
      // short-lived pulls: one left by a controller that died (its machine with it) stops taking messages soon
      const messages = await consumer.consume({
        max_messages: SHARED_PULL_BATCH,
        expires: SHARED_PULL_EXPIRES_MS,
      });
      for await (const m of messages) {
        if (stopped()) break;
        try {
          await handle(m);
        } catch (e) {
          if (!stopped()) warn(`${stream}: ${(e as Error).message.split("\n")[0]}`);
        }
      }
    } catch (e) {
      // said once a streak: while a server is away this fails until it is back
      if (!stopped() && !said)
        warn(`${stream} consumer: ${(e as Error).message.split("\n")[0]}; trying again`);
      said = true;
    }
    if (!stopped()) await new Promise((r) => setTimeout(r, CONSUME_RETRY_MS));
  }
}
