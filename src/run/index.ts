// run: the run loop of `mesh-host run` — dialling again and how long to wait, newest wins (the one place a
// delivery is decided superseded), the drift and heartbeat timers, a delivery handed to apply and settled once
// its report is in the outbox, the release a declaration names fetched, verified and swapped in (upgrade.ts),
// and a clean exit for an upgrade or a move. It joins the link to apply and the store.
export { backoffMs } from "./backoff.ts";
export { BinaryAtStart } from "./binary.ts";
export {
  type Dial,
  type ExitReason,
  type LinkOpened,
  type LinkPort,
  type NodeDeps,
  RunLoop,
  type RunLoopOptions,
} from "./run-loop.ts";
export { releaseDir, type UpgradeDeps, type Upgraded, upgradeTo } from "./upgrade.ts";
