// A declaration's wake-up (protocol.md "Direct reads"). The pusher publishes it on `mesh.wake.<node>` once the
// stream has stored the declaration (its ack is in hand); every node's account imports it as `mesh.declare.<node>`,
// the subject a node reading directly subscribes (accounts.ts DECLARE_WAKE). The core copy of the publish itself
// reaches no node: it can arrive before the stream has stored the declaration, and a read it wakes finds the one
// before and is asked again, later each time.
import type { PubAck } from "@nats-io/jetstream";
import { declareSubject } from "../vocabulary/index.ts";
import { type Bus, jsCall } from "./bus.ts";

const wakeSubject = (node: string): string => `mesh.wake.${node}`;

/** A declaration's wake-up, its bytes as the stream holds them: the node reads until a replica answers the same. */
export function wakeNode(bus: Pick<Bus, "nc">, node: string, data: Uint8Array): void {
  bus.nc.publish(wakeSubject(node), data);
}

/**
 * The declaration into the stream, then its wake-up, the same bytes: a node compares them with what its read
 * finds, so a replica that lags the stream's leader is asked again until it has them.
 */
export async function publishDeclaration(
  bus: Pick<Bus, "js" | "nc">,
  node: string,
  data: Uint8Array,
): Promise<PubAck> {
  const ack = await jsCall(() => bus.js.publish(declareSubject(node), data));
  wakeNode(bus, node, data);
  return ack;
}
