// The link layer's whole surface: other layers import only this.
export { type Answered, type Approach, type Asking, type AskOptions, ask } from "./asking.ts";
export { type DialFailure, type Dialled, type DialOptions, dial, fingerprintOf } from "./dial.ts";
export {
  type Bound,
  type Delivered,
  type Link,
  type LinkOptions,
  type Opened,
  openBound,
  openLink,
  type Reported,
  type Sent,
  type Settled,
} from "./link.ts";
