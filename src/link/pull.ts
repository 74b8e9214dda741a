// One message pulled from the node's consumer, and the pause between failed pulls: what link.ts's pull loop is made of.
import type { Consumer, JsMsg } from "@nats-io/jetstream";

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
