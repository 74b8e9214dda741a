// The link's timeouts and the names protocol.md composes from a node's name, each said once.

/** One server: TCP, the server's INFO, the TLS handshake and CONNECT, each dial. */
export const DIAL_TIMEOUT_MS = 5_000;
/** The client's own pings find a server that went away without closing; the hold then dials again. */
export const PING_INTERVAL_MS = 20_000;
export const MAX_PINGS_OUT = 2;
/**
 * A pull request's life. Long, so an idle node sends one request per this long; the server's idle
 * heartbeats (every 30 s, the client's ceiling) say the pull is alive meanwhile.
 */
export const PULL_EXPIRES_MS = 5 * 60_000;
/** A failed pull is tried again after this, times the failures in a row, up to the max; past the count, the link closes. */
export const PULL_RETRY_MS = 250;
export const PULL_RETRY_MAX_MS = 2_000;
export const PULL_FAILURES_MAX = 5;
/** How long a report's publish, an ack and a term wait for the server's word. */
export const SERVER_ACK_TIMEOUT_MS = 5_000;
/** The longest INFO line a preflight reads before deciding it is not talking to a NATS server. */
export const MAX_INFO_BYTES = 64 * 1024;

export const nodeUser = (node: string): string => `node.${node}`;
export const enrolUser = (node: string): string => `enrol.${node}`;
export const nodeInboxPrefix = (node: string): string => `_INBOX.node.${node}`;
export const enrolInboxPrefix = (node: string): string => `_INBOX.enrol.${node}`;
export const enrolSubject = (node: string): string => `mesh.enrol.${node}`;
export const reportSubject = (node: string): string => `mesh.report.${node}`;
export const heartbeatSubject = (node: string): string => `mesh.heartbeat.${node}`;
export const rekeySubject = (node: string): string => `mesh.rekey.${node}`;
