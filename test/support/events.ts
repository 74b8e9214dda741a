// How long a test waits for an event before calling it missing. No vitest import: scripts/chaos.ts uses this too.
import { RECONNECT_MAX_MS } from "../../src/defaults.ts";

/**
 * How long a test waits for an event (a report, a heartbeat, an enrolment, a file, a process's end) before
 * calling it missing: a failure bound for a busy two-core machine, never a pace; nothing waits for it once the
 * event comes. A busy machine makes a node's dial or ack time out and the hold wait before dialling again, up to
 * RECONNECT_MAX_MS at a time: the bound outlasts more than two such waits.
 */
export const EVENT_WAIT_MS = 3 * RECONNECT_MAX_MS;

/**
 * An action's argv that runs until `path` exists: an apply kept busy exactly as long as the test wants (to kill
 * it, or to publish behind it), where a `sleep` would end on its own before a busy machine's test got there.
 */
export function untilFileArgv(path: string): string[] {
  return ["sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done', path];
}
