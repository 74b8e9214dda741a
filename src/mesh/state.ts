// The controller's state, on the bus (protocol.md, "the controller's state"): four key-value buckets of the
// mesh, replicated on its servers, so every `mesh up` and every copy of the mesh directory reads and writes one
// truth. The directory keeps keys and configuration only.
//   mesh-nodes  key: node name   the node's record: public keys, labels, facts, its last serial (raised by CAS)
//   mesh-codes  key: node name   its enrolment code: its enrolling user, its expiry, spent (by CAS) by the first question
//   mesh-fleet  key: node name   the last heartbeat and report the controllers heard from it
//   mesh-jobs   key: job id      push/plan/rollout job records (made here, filled by the fleet commands)
import * as z from "zod";
import { KV_CAS_TRIES, KV_LIST_BATCH, KV_REPLICAS_MAX, NODE_RECORD_FORMAT } from "../defaults.ts";
import { NodeName } from "../vocabulary/index.ts";
import { type Bus, connectBus, jsCall } from "./bus.ts";
import { Bucket, type Entry, modified } from "./kv.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import type { NodesAccount } from "./shards.ts";

const B64Key = z.string().regex(/^[A-Za-z0-9+/]{43}=$/);
const NodeKeys = z.strictObject({ identity: B64Key, sealing: B64Key, overlay: B64Key });

export const Push = z.strictObject({
  serial: z.number().int().min(1),
  digest: z.string(),
  seq: z.number().int().nullable(),
  at: z.string(),
});
export type Push = z.infer<typeof Push>;

export const NodeRecord = z.strictObject({
  format: z.literal(NODE_RECORD_FORMAT),
  node: NodeName,
  /** The code's enrolling user (its public nkey) and when it expires, until the code is spent. */
  enrol: z.strictObject({ user: z.string().regex(/^U[A-Z2-7]{55}$/), expires_at: z.string() }).nullable(),
  added_at: z.string(),
  enrolled_at: z.string().nullable(),
  keys: NodeKeys.nullable(),
  labels: z.record(z.string(), z.string()),
  facts: z.record(z.string(), z.string()).nullable(),
  /** The highest serial this mesh has signed for the node: the next push takes one more, by compare-and-set. */
  serial: z.number().int().min(0),
  pushes: z.array(Push),
  /** The last declaration pushed, as given (sealed secrets and all, no serial): what a move carries. */
  last_body: z.record(z.string(), z.unknown()).nullable(),
  moved_to: z.string().nullable(),
  /**
   * The account its user is in: its shard (accounts.ts shardOf), set when it enrols; absent for a node enrolled
   * before the shards, whose user is NODES' until it enrols again.
   */
  account: z
    .string()
    .regex(/^NODES\.[0-9a-f]{2}$/)
    .optional(),
});
export type NodeRecord = z.infer<typeof NodeRecord>;

/** The account a node's user is in: its record's shard, or NODES (enrolled before the shards). */
export function nodesAccountOf(record: Pick<NodeRecord, "account">): NodesAccount {
  return (record.account as NodesAccount | undefined) ?? "NODES";
}

/** An enrolment code's record: spent once, by the first valid question, by compare-and-set. */
export const CodeRecord = z.strictObject({
  node: NodeName,
  /** Its enrolling user's public nkey: the code itself (its JWT and seed) is never kept. */
  user: z.string().regex(/^U[A-Z2-7]{55}$/),
  /**
   * The account of that user: ENROL; absent in a code issued before ENROL existed (its user is NODES', revoked
   * there). Its JWT was issued at `added_at`'s second.
   */
  account: z.literal("ENROL").optional(),
  added_at: z.string(),
  expires_at: z.string(),
  /** Who spent it: the keys of the question answered (that question, delivered again, is answered again). */
  spent: z.strictObject({ at: z.string(), keys: NodeKeys }).nullable(),
});
export type CodeRecord = z.infer<typeof CodeRecord>;

export const FleetEntry = z.strictObject({
  heartbeat: z
    .strictObject({ at: z.string(), version: z.string(), uptime_s: z.number(), confirmed: z.boolean() })
    .nullable(),
  report: z
    .strictObject({
      at: z.string(),
      outcome: z.string(),
      seq: z.number().int(),
      digest: z.string(),
      serial: z.number().int().nullable(),
      mode: z.string().nullable(),
    })
    .nullable(),
  dropped_heartbeats: z.number().int().min(0),
  /** Reports and heartbeats on its subjects not signed by its identity key (heard.ts), dropped; absent is none. */
  dropped_unverified: z.number().int().min(0).optional(),
});
export type FleetEntry = z.infer<typeof FleetEntry>;

/** A job's record is the fleet commands' to define; this layer only makes its bucket. */
export const JobRecord = z.record(z.string(), z.unknown());

export const BUCKETS = {
  nodes: "mesh-nodes",
  codes: "mesh-codes",
  fleet: "mesh-fleet",
  jobs: "mesh-jobs",
} as const;

export interface State {
  bus: Bus;
  nodes: Bucket<NodeRecord>;
  codes: Bucket<CodeRecord>;
  fleet: Bucket<FleetEntry>;
  jobs: Bucket<z.infer<typeof JobRecord>>;
}

export function stateOf(bus: Bus): State {
  return {
    bus,
    nodes: new Bucket(bus, BUCKETS.nodes, NodeRecord, true),
    codes: new Bucket(bus, BUCKETS.codes, CodeRecord, true),
    fleet: new Bucket(bus, BUCKETS.fleet, FleetEntry),
    jobs: new Bucket(bus, BUCKETS.jobs, JobRecord),
  };
}

/** One copy a server, never more than KV_REPLICAS_MAX: a majority of three survives the loss of one. */
export function replicasOf(servers: number): number {
  return Math.min(servers, KV_REPLICAS_MAX);
}

export async function ensureBuckets(state: State, replicas: number): Promise<void> {
  for (const b of [state.nodes, state.codes, state.fleet, state.jobs]) await b.ensure(replicas);
}

/**
 * A short command's state: the bus reached (or one line saying it is not), the buckets there (or one line
 * saying the mesh has not been brought up since it was made or migrated).
 */
export async function openState(mesh: MeshDir, opts: { reconnect?: boolean; name?: string } = {}) {
  const bus = await connectBus(mesh, opts);
  const state = stateOf(bus);
  // a failure past the bus's own retries closes the connection: a short command must not hang on it
  try {
    await checkBuckets(state);
  } catch (e) {
    await bus.close();
    throw e;
  }
  return state;
}

async function checkBuckets(state: State): Promise<void> {
  const bus = state.bus;
  const there = await jsCall(() => bus.jsm.streams.info(state.nodes.stream)).then(
    () => true,
    (e: Error) => {
      if (/stream not found/i.test(e.message)) return false;
      throw e;
    },
  );
  if (!there)
    throw new MeshRefused(
      `the mesh's bus has no ${BUCKETS.nodes} bucket yet: \`mesh-host mesh up\` makes it (wait for "mesh up:")`,
    );
}

export async function withState<T>(mesh: MeshDir, use: (state: State) => Promise<T>): Promise<T> {
  const state = await openState(mesh);
  try {
    return await use(state);
  } finally {
    await state.bus.close();
  }
}

/** The node's record, or a refusal naming it. */
export async function knownNode(state: State, name: string): Promise<Entry<NodeRecord>> {
  const entry = await state.nodes.get(name);
  if (!entry) throw new MeshRefused(`node ${name} is not in this mesh`);
  return entry;
}

/** Change a node's record by compare-and-set, read again when another operator or controller got there first. */
export async function changeNode<R>(
  state: State,
  name: string,
  change: (record: NodeRecord) => { value: NodeRecord; result: R },
): Promise<R> {
  return (await changedNode(state, name, change)).result;
}

/**
 * `changeNode`, starting from the record as the caller last read or wrote it (`first`: no read before the first
 * try), and answering with the record as written: a caller changing many records in turn reads none it holds.
 */
export async function changedNode<R>(
  state: State,
  name: string,
  change: (record: NodeRecord) => { value: NodeRecord; result: R },
  first?: Entry<NodeRecord>,
): Promise<{ result: R; entry: Entry<NodeRecord> }> {
  return await modified(
    state.nodes,
    name,
    (current) => {
      if (!current) throw new MeshRefused(`node ${name} is not in this mesh`);
      return change(current.value);
    },
    KV_CAS_TRIES,
    first,
  );
}

/** The records of `names`, read KV_LIST_BATCH at a time; a refusal naming the first not in this mesh. */
export async function knownNodes(state: State, names: string[]): Promise<Entry<NodeRecord>[]> {
  const out: Entry<NodeRecord>[] = [];
  for (let i = 0; i < names.length; i += KV_LIST_BATCH) {
    const read = await Promise.allSettled(names.slice(i, i + KV_LIST_BATCH).map((n) => knownNode(state, n)));
    for (const r of read) {
      if (r.status === "rejected") throw r.reason;
      out.push(r.value);
    }
  }
  return out;
}

export async function allNodes(state: State): Promise<NodeRecord[]> {
  return (await state.nodes.entries()).map((e) => e.value);
}

export async function fleetOf(state: State): Promise<Map<string, FleetEntry>> {
  return new Map((await state.fleet.entries()).map((e) => [e.key, e.value]));
}
