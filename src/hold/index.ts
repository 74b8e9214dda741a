export { backoffMs } from "./backoff.ts";
export { digestOfFile } from "./binary.ts";
export {
  type Delivery,
  type Dial,
  type ExitReason,
  Hold,
  type HoldOptions,
  type Link,
  type LinkOpened,
  type NodeDeps,
} from "./hold.ts";
