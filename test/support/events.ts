// How long a test waits for an event before calling it missing. No vitest import: scripts/chaos.ts uses this too.
import { RECONNECT_MAX_MS } from "../../src/defaults.ts";

/**
 * How long a test waits for an event (a report, a heartbeat, an enrolment, a file, a process's end) before
 * calling it missing: a failure bound for a busy two-core machine, never a pace; nothing waits for it once the
 * event comes. A busy machine makes a node's dial or ack time out and the hold wait before dialling again, up to
 * RECONNECT_MAX_MS at a time: the bound outlasts more than two such waits.
 */
export const EVENT_WAIT_MS = 3 * RECONNECT_MAX_MS;
