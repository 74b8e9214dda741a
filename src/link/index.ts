// link: the node's one outbound connection to the bus — dialling (pinned TLS, identity sign-in), hearing
// declarations, saying reports and heartbeats, the rekey (rekey.ts), reading releases by direct get; enrolment
// (asking.ts) is its own seam. It knows the vocabulary it speaks and the nats client, nothing of the host.
// Other layers import only this.
export { type Answered, type Approach, type Asking, type AskOptions, ask } from "./asking.ts";
export { type DialFailure, type Dialled, type DialOptions, dial, fingerprintOf } from "./dial.ts";
export { type Chunk, type ReleaseSource, releaseSource } from "./fetch-release.ts";
export {
  type Bound,
  type Delivered,
  type Link,
  type LinkOptions,
  type Opened,
  openLink,
  type Reported,
  type Sent,
  type Settled,
} from "./link.ts";
export { openBound } from "./open.ts";
export { type Rekey, signRekey, type Told, tellRekey, verifyRekey } from "./rekey.ts";
