// nats.js 3.4 settles no flush pending when its connection closes (close rejects no outstanding PING): an await of
// `nc.flush()` on a connection that dies under it waits for ever, with no timer and no socket left to end it. A
// simulated fleet of 10,000 found nodes so stuck after their server cut them, never dialling again. Both halves,
// the link and the operator's, wait on the server through this.
import type { NatsConnection } from "@nats-io/transport-node";

/** Until the server has what was published on `nc`; rejected, saying `closedWhy`, when the connection closes first. */
export async function flushed(nc: NatsConnection, closedWhy: string): Promise<void> {
  const answered = await Promise.race([nc.flush().then(() => true), nc.closed().then(() => false)]);
  if (!answered) throw new Error(closedWhy);
}
