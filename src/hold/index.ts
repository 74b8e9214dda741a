export { backoffMs } from "./backoff.ts";
export { type Delivery, type Dial, type ExitReason, Hold, type HoldOptions, type Link } from "./hold.ts";
export { applyDelivered, applyKept, digestOfFile, keptEnvelope, type NodeDeps } from "./node.ts";
