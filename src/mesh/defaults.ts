// The operator's half's defaults and the names protocol.md composes, each said once.

export const DEFAULT_MESH_DIR = "/var/lib/mesh-host-mesh";
export const MESH_DIR_MODE = 0o700;
export const MESH_FILE_MODE = 0o600;
export const MESH_FORMAT = 1;

/** `mesh init` with no `--server`: one server on this machine, the next ones on the ports after it. */
export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_PORT = 4222;
/** Each server listens for its cluster's routes on the port after its own (documented in the README). */
export const ROUTE_PORT_OFFSET = 1;
/** `--servers N` with no `--server`: server i listens on DEFAULT_PORT + (i-1) * this. */
export const SERVER_PORT_STEP = 10;
export const MAX_SERVERS = 7;
export const CERT_DAYS = 3650;

/** How long a server has to say it is ready, or reloaded, in its log. */
export const SERVER_START_MS = 30_000;
export const SERVER_RELOAD_MS = 15_000;
export const SERVER_STOP_MS = 10_000;
/** How long a command waits for the mesh directory's lock (another `mesh` command holding it). */
export const LOCK_WAIT_MS = 30_000;
/** JetStream answers once the servers agree on a leader: a cluster coming up takes a few seconds. */
export const JETSTREAM_READY_MS = 60_000;
export const CONNECT_TIMEOUT_MS = 5_000;
/** How long a JetStream call is tried again while the servers reload a user list. */
export const JS_RELOAD_MS = 15_000;
/** `mesh push --wait-s`: how long the reports are waited for. */
export const PUSH_WAIT_S = 60;
/** The fleet view is written at most this often, however many heartbeats a second arrive. */
export const FLEET_WRITE_MS = 1_000;
/** How many pushes a node's record remembers (serial, stream seq, digest), to name a report's serial. */
export const PUSHES_KEPT = 20;
/** REPORTS keeps a month: the fleet view needs the newest, an operator's inquiry a little more. */
export const REPORTS_MAX_AGE_S = 30 * 24 * 3600;

export const CONTROLLER_USER = "mesh";
export const ROUTE_USER = "route";
export const STREAM_SUBJECTS = {
  ENROL: "mesh.enrol.>",
  DECLARE: "mesh.declare.>",
  REPORTS: "mesh.report.>",
  REKEY: "mesh.rekey.>",
} as const;
export type StreamName = keyof typeof STREAM_SUBJECTS;
export const ENROL_CONSUMER = "mesh-enrol";
export const REPORTS_CONSUMER = "mesh-reports";

export const nodeUser = (node: string): string => `node.${node}`;
export const enrolUser = (node: string): string => `enrol.${node}`;
export const nodeConsumer = (node: string): string => `node-${node}`;
export const declareSubject = (node: string): string => `mesh.declare.${node}`;
export const reportSubject = (node: string): string => `mesh.report.${node}`;
export const heartbeatSubject = (node: string): string => `mesh.heartbeat.${node}`;
