// The controller's connection to its own bus: trusting exactly the mesh's certificate, as a user of MESH minted
// for the connection (claims.ts), and the streams and consumers protocol.md says the mesh creates (the node
// creates none, ever), each bounded per node and in all (protocol.md "Limits").
import {
  AckPolicy,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  StorageType,
} from "@nats-io/jetstream";
import { connect, errors, type NatsConnection, nanos } from "@nats-io/transport-node";
import {
  CONSUMER_LEADER_MS,
  CONTROLLER_AUTH_RETRY_MS,
  CONTROLLER_AUTH_TRIES,
  DECLARE_MAX_BYTES,
  ENROL_MAX_AGE_S,
  ENROL_MAX_BYTES,
  ENROL_PER_NODE,
  JETSTREAM_READY_MS,
  JETSTREAM_READY_POLL_MS,
  JS_RELOAD_MS,
  JS_RETRY_MS,
  MESH_CONNECT_TIMEOUT_MS,
  MESH_RECONNECT_ATTEMPTS,
  MESH_RECONNECT_WAIT_MS,
  REKEY_MAX_BYTES,
  REKEY_PER_NODE,
  REPORT_MAX_MSG_BYTES,
  REPORTS_MAX_AGE_S,
  REPORTS_MAX_BYTES,
  REPORTS_PER_NODE,
  SHARED_ACK_WAIT_MS,
  STREAM_MAX_MSG_BYTES,
} from "../defaults.ts";
import {
  CONTROLLER_USER,
  declareSubject,
  ENROL_CONSUMER,
  nodeConsumer,
  REPORTS_CONSUMER,
  STREAM_SUBJECTS,
  type StreamName,
} from "../vocabulary/index.ts";
import { serviceAuthenticator } from "./claims.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";

/**
 * No server of the mesh answered: the state lives on the bus, so nothing can be read or done (exit 1, one line);
 * never a stale copy read instead.
 */
export class BusDown extends Error {}

export interface Bus {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  close(): Promise<void>;
}

/**
 * Connect as the controller. `reconnect`: a long-running `up` or `watch` rides out a server restart; a short
 * command fails at once, one line, when the bus is not up.
 */
export async function connectBus(
  mesh: MeshDir,
  opts: { reconnect?: boolean; name?: string; system?: boolean } = {},
): Promise<Bus> {
  const nc = await dialController(mesh, opts);
  // no API check here: a cluster still electing its leaders answers JetStream later, and `up` waits for that
  const jsm = await jetstreamManager(nc, { timeout: MESH_CONNECT_TIMEOUT_MS, checkAPI: false });
  return { nc, js: jetstream(nc), jsm, close: () => nc.close().catch(() => undefined) };
}

/**
 * The controller's connection (a MESH user, or a SYS one for revocations), signed in with a key made for it.
 * A refusal is tried again a few times (a server still loading its accounts), then said in our words rather than
 * the server's "Authorization Violation".
 */
async function dialController(
  mesh: MeshDir,
  opts: { reconnect?: boolean; name?: string; system?: boolean },
): Promise<NatsConnection> {
  const where = mesh.urls().join(", ");
  const name = opts.name ?? CONTROLLER_USER;
  const authenticator = serviceAuthenticator(mesh.accountKeys(), opts.system ? "system" : "mesh", name);
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect({
        servers: mesh.urls(),
        authenticator,
        name,
        tls: { ca: mesh.certPem() },
        timeout: MESH_CONNECT_TIMEOUT_MS,
        reconnect: opts.reconnect ?? false,
        maxReconnectAttempts: MESH_RECONNECT_ATTEMPTS,
        reconnectTimeWait: MESH_RECONNECT_WAIT_MS,
      });
    } catch (e) {
      if (e instanceof MeshRefused) throw e;
      if (!(e instanceof errors.AuthorizationError))
        throw new BusDown(
          `the mesh's bus does not answer at ${where} (is \`mesh-host mesh up\` running?): ${firstLine(e)}`,
        );
      if (attempt >= CONTROLLER_AUTH_TRIES)
        throw new BusDown(
          `the mesh's bus at ${where} refuses the controller's credentials of ${mesh.dir}: its servers were made from another mesh directory`,
        );
    }
    await new Promise((r) => setTimeout(r, CONTROLLER_AUTH_RETRY_MS));
  }
}

/**
 * While a server reloads its user list, the account's JetStream API goes unanswered for a moment; while a cluster
 * that lost a server elects new leaders, its requests time out or say JetStream is unavailable for a moment.
 */
function reloading(e: unknown): boolean {
  return /no responders|not enabled|503|timeout|temporarily unavailable/i.test(firstLine(e));
}

/** A JetStream call, tried again while the servers reload or elect (up to JS_RELOAD_MS); any other failure at once. */
export async function jsCall<T>(call: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + JS_RELOAD_MS;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (!reloading(e) || Date.now() > deadline) throw e;
    }
    await new Promise((r) => setTimeout(r, JS_RETRY_MS));
  }
}

export function firstLine(e: unknown): string {
  return String((e as Error)?.message ?? e).split("\n")[0]!;
}

/**
 * Each stream's bounds (protocol.md "Limits"): per subject, so one node's messages push out only its own, and in
 * all, so the streams together stay within the servers' store whatever any node sends.
 */
const STREAM_BOUNDS: Record<StreamName, Record<string, unknown>> = {
  // newest wins: a node that was away finds only the last declaration
  // allow_direct: a node reads its last declaration by direct get, answered by any replica (protocol.md)
  DECLARE: { max_msgs_per_subject: 1, max_bytes: DECLARE_MAX_BYTES, allow_direct: true },
  REPORTS: {
    max_msgs_per_subject: REPORTS_PER_NODE,
    max_bytes: REPORTS_MAX_BYTES,
    max_msg_size: REPORT_MAX_MSG_BYTES,
    max_age: nanos(REPORTS_MAX_AGE_S * 1000),
  },
  REKEY: { max_msgs_per_subject: REKEY_PER_NODE, max_bytes: REKEY_MAX_BYTES },
  ENROL: {
    max_msgs_per_subject: ENROL_PER_NODE,
    max_bytes: ENROL_MAX_BYTES,
    max_age: nanos(ENROL_MAX_AGE_S * 1000),
  },
};

/** The four streams, replicated on every server; made or brought to this configuration, whichever is needed. */
export async function ensureStreams(bus: Bus, replicas: number): Promise<void> {
  for (const [name, subject] of Object.entries(STREAM_SUBJECTS) as [StreamName, string][]) {
    const config = {
      name,
      subjects: [subject],
      storage: StorageType.File,
      num_replicas: replicas,
      max_msg_size: STREAM_MAX_MSG_BYTES,
      // a stream made before these bounds had none: an update brings it to them
      discard: DiscardPolicy.Old,
      ...STREAM_BOUNDS[name],
    };
    const exists = await bus.jsm.streams.info(name).then(
      () => true,
      () => false,
    );
    if (exists) await bus.jsm.streams.update(name, config);
    else await bus.jsm.streams.add(config);
  }
  await sharedConsumer(bus, "ENROL", ENROL_CONSUMER);
  await sharedConsumer(bus, "REPORTS", REPORTS_CONSUMER);
}

/**
 * A durable every controller pulls from. A message handed to a controller that died (its machine with it) is
 * handed to another after SHARED_ACK_WAIT_MS, not the server's default 30 s: a node waiting for its enrolment
 * answer waits no longer than that. Brought to this configuration when an older mesh made it otherwise.
 */
async function sharedConsumer(bus: Bus, stream: string, durable: string): Promise<void> {
  const config = { ack_policy: AckPolicy.Explicit, ack_wait: nanos(SHARED_ACK_WAIT_MS) };
  const info = await bus.jsm.consumers.info(stream, durable).catch(() => null);
  if (!info) await bus.jsm.consumers.add(stream, { durable_name: durable, ...config });
  else if (info.config.ack_wait !== config.ack_wait) await bus.jsm.consumers.update(stream, durable, config);
}

/**
 * Until JetStream answers and the streams are made: a cluster elects its leaders first, and a server started
 * alone (`up --only`) waits for enough of the others. Said once when it takes long, never given up.
 */
export async function awaitStreams(
  bus: Bus,
  replicas: number,
  stopped: () => boolean,
  warn: (line: string) => void,
  /** More the mesh makes once JetStream answers (the buckets of the controller's state). */
  also: () => Promise<void> = async () => {},
): Promise<boolean> {
  const slow = Date.now() + JETSTREAM_READY_MS;
  let said = false;
  while (!stopped()) {
    try {
      await ensureStreams(bus, replicas);
      await also();
      await enrolmentsLed(bus);
      return true;
    } catch (e) {
      if (!said && Date.now() > slow) {
        warn(
          `JetStream has not made the mesh's streams yet (${firstLine(e)}); still waiting for the other servers`,
        );
        said = true;
      }
    }
    await new Promise((r) => setTimeout(r, JETSTREAM_READY_POLL_MS));
  }
  return false;
}

/**
 * Until a consumer of a replicated stream has its leader (up to CONSUMER_LEADER_MS). Its info is answered before
 * it has one, so a node told of it binds at once; but the pull it then sends has no leader to take it, and the
 * node learns so only from missed heartbeats a minute and more later: a node moved onto a cluster with a server
 * down was up there, and the first push to it said "no report within 60 s" (issue 27, item 9). One server: no
 * cluster, nothing to wait for.
 */
async function consumerLed(bus: Bus, stream: string, name: string): Promise<void> {
  await led(() => bus.jsm.consumers.info(stream, name));
}

/**
 * Until ENROL and its shared consumer have their leaders: a cluster just raised made them before it elected who
 * keeps them, and a question asked meanwhile goes unacknowledged. `up` says it answers enrolments only after.
 */
async function enrolmentsLed(bus: Bus): Promise<void> {
  await led(() => bus.jsm.streams.info("ENROL"));
  await consumerLed(bus, "ENROL", ENROL_CONSUMER);
}

/** Until what `info` reads has its leader, or is on one server (no cluster), for up to CONSUMER_LEADER_MS. */
async function led(info: () => Promise<{ cluster?: { leader?: string } }>): Promise<void> {
  const deadline = Date.now() + CONSUMER_LEADER_MS;
  while (Date.now() < deadline) {
    const read = await info().catch(() => null);
    if (read && (!read.cluster || read.cluster.leader)) return;
    await new Promise((r) => setTimeout(r, JS_RETRY_MS));
  }
}

/** A revoked node: its consumer and its declarations (which hold secrets sealed to it) go. */
export async function dropNode(bus: Bus, node: string): Promise<void> {
  await dropConsumer(bus, node);
  await bus.jsm.streams.purge("DECLARE", { filter: declareSubject(node) }).catch(() => undefined);
}

/** A node's consumer on DECLARE, gone (or never there); its declarations stay for it to read directly. */
export async function dropConsumer(bus: Bus, node: string): Promise<boolean> {
  return await bus.jsm.consumers.delete("DECLARE", nodeConsumer(node)).catch(() => false);
}

/** What a consumer's node is now: not in the mesh, or enrolled into its shard (its user reads directly). */
export type ConsumerOwner = "none" | "shard" | "other";

/**
 * Consumers of DECLARE no node uses: whose node has no record (left by a `node rm` made while the bus was down),
 * and whose node has enrolled again into its shard (its user has no grant on a consumer; the answer dropped it,
 * unless the bus failed then). Each node is looked up again before its consumer goes: another operator may have
 * added or removed it since. Those without a record lose their declarations too.
 */
export async function sweepConsumers(
  bus: Bus,
  ownerOf: (node: string) => Promise<ConsumerOwner>,
): Promise<string[]> {
  const held: string[] = [];
  for await (const info of bus.jsm.consumers.list("DECLARE")) {
    const node = info.name.startsWith("node-") ? info.name.slice(5) : null;
    if (node) held.push(node);
  }
  const swept: string[] = [];
  for (const node of held) {
    const owner = await ownerOf(node);
    if (owner === "other") continue;
    if (owner === "none") await dropNode(bus, node);
    else await dropConsumer(bus, node);
    swept.push(node);
  }
  return swept;
}
