// A heartbeat as the node says it now: its version and uptime, its last apply, whether its binary is confirmed,
// and its facts (so the mesh's record of the node follows a change).
import type { NodeParts } from "../apply/index.ts";
import { BUILD } from "../build-info.ts";
import { hostFacts } from "../hosts/index.ts";
import type { Heartbeat } from "../vocabulary/index.ts";

/**
 * `confirmed` is this running binary's: a `confirmed` file left by the binary before an upgrade would otherwise
 * make a new release look confirmed before its first reconcile, and a rollout's health gate would pass on it.
 */
export function heartbeatNow(
  deps: Pick<NodeParts, "node" | "state" | "host">,
  startedMs: number,
  confirmed: boolean,
): Heartbeat {
  const last = deps.state.readLast();
  return {
    v: 1,
    node: deps.node,
    at: new Date().toISOString(),
    version: BUILD.version,
    uptime_s: Math.floor((Date.now() - startedMs) / 1000),
    last: last ? { seq: last.seq, outcome: last.outcome, at: last.at } : null,
    confirmed,
    facts: hostFacts(deps.host.kind),
  };
}
