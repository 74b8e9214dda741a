// hold: the run loop of `mesh-host run` — dialling again and how long to wait, the newest delivery wins, the
// drift and heartbeat timers, a delivery applied under the lock (node.ts) and its report kept then said, and a
// clean exit for an upgrade or a move. It joins the link (below it, beside apply) to apply and the store.
export { backoffMs } from "./backoff.ts";
export { type Delivery, type Dial, type ExitReason, Hold, type HoldOptions, type Link } from "./hold.ts";
export { applyDelivered, applyKept, digestOfFile, keptEnvelope, type NodeDeps } from "./node.ts";
