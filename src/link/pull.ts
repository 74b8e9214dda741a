// The node's consumer (a node enrolled before direct reads, whose membership names one): bound and checked, one
// message pulled from it, and the pause between failed pulls: what link.ts's pull loop is made of.
import type { Consumer, JetStreamClient, JsMsg } from "@nats-io/jetstream";
import type { Membership } from "../vocabulary/index.ts";
import { bindFailure } from "./failures.ts";

export type BoundConsumer =
  | { ok: true; consumer: Consumer }
  | { ok: false; kind: "missing" | "refused" | "unreachable"; reason: string };

/** The membership's consumer, once it is shown to deliver the node's subject only and to take explicit acks. */
export async function bindConsumer(js: JetStreamClient, membership: Membership): Promise<BoundConsumer> {
  const { stream, consumer, subject } = membership;
  if (!stream || !consumer)
    return { ok: false, kind: "refused", reason: "the membership names no stream or no consumer to bind" };
  if (!subject)
    return {
      ok: false,
      kind: "refused",
      reason:
        "the membership's subject is empty: a node binds by stream, consumer and subject, never to whatever a consumer delivers",
    };
  let bound: Consumer;
  try {
    bound = await js.consumers.get(stream, consumer);
  } catch (e) {
    return { ok: false, ...bindFailure(e, membership) };
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
  return { ok: true, consumer: bound };
}

/** The next message within `expires`, or null when none came. */
export async function pullOne(consumer: Consumer, expires: number): Promise<JsMsg | null> {
  const batch = await consumer.fetch({ max_messages: 1, expires });
  try {
    for await (const m of batch) return m;
    return null;
  } finally {
    batch.stop();
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
