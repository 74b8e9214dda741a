// `mesh push`: the declaration in FILE, for each target node — its secrets sealed to that node's key, its
// `node`, next `serial` and `issued_at` set, checked by the host's own vocabulary, signed, published — and the
// reports waited for. Every check runs before anything is sent or any serial is used: a refused push
// changes nothing, here or on the bus.

import { PUSH_PUBLISH_BATCH, PUSHES_KEPT } from "../defaults.ts";
import { flushed } from "../flushed.ts";
import {
  type Declaration,
  digestOf,
  INSTALLER_SECRET,
  parseDeclarationBody,
  type Report,
  refusalLine,
  reportSubject,
  seal,
  secretsOf,
  signEnvelope,
} from "../vocabulary/index.ts";
import { firstLine } from "./bus.ts";
import { heardFrom } from "./heard.ts";
import { Conflict, type Entry } from "./kv.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import { droppedBy, refuseRemovals } from "./removals.ts";
import { allNodes, changedNode, knownNode, knownNodes, type NodeRecord, type State } from "./state.ts";
import { publishDeclaration } from "./wake.ts";

export interface PushInput {
  /** FILE's JSON: a declaration without (or with this node's) `node`; push sets `serial` and `issued_at`. */
  file: Record<string, unknown>;
  /** `--secret KEY=FILE`: the value alone, sealed per node under `secrets.KEY`. */
  secrets: ReadonlyMap<string, Uint8Array>;
  /** `--allow-removals`: a push may leave out resources the node last had (else it is refused: removals.ts). */
  allowRemovals?: boolean;
}

export interface Composed {
  node: string;
  serial: number;
  body: string;
  digest: string;
  /** The node's identity key: what the body is addressed to, and what its report must be signed by. */
  to: string;
  /** What a later move carries again: the declaration as pushed, without its order. */
  kept: Record<string, unknown>;
  /** The node's record as this push's serial left it: what recording the push's stream sequence starts from. */
  record?: Entry<NodeRecord>;
}

export interface Pushed extends Composed {
  seq: number;
  report: Report | null;
  /**
   * A later declaration the node reported instead, before it took this one: pushed meanwhile (another console,
   * a rollout), it replaced this one on the bus (DECLARE keeps one a node) or was taken first. `serial` as the
   * node's record knows it (null once that push has left the record's list).
   */
  replacedBy: { serial: number | null; seq: number } | null;
  /**
   * Why its stream sequence is not in the node's record (the bus stopped taking the writes), or null. The push is
   * out all the same: the sequence names the serial of a heartbeat's last apply, and tells a resumed rollout the
   * push was published (it pushes again without it).
   */
  unrecorded: string | null;
}

/** The newest other declaration each node reported while a push waited: its stream sequence and digest. */
type Later = Map<string, { seq: number; digest: string }>;

/** Every target named and enrolled, or a refusal naming the first that is not. */
export async function targetsOf(state: State, names: string[], all: boolean): Promise<string[]> {
  if (all) {
    const enrolled = (await allNodes(state)).filter((r) => r.keys && !r.moved_to).map((r) => r.node);
    if (!enrolled.length) throw new MeshRefused("--all: no node of this mesh has enrolled yet");
    return enrolled;
  }
  if (new Set(names).size !== names.length) throw new MeshRefused("a node is named twice");
  for (const { value: r, key: n } of await knownNodes(state, names)) {
    if (!r.keys) throw new MeshRefused(`node ${n} has not enrolled yet: there is no key to seal to`);
    if (r.moved_to) throw new MeshRefused(`node ${n} has moved to the mesh at ${r.moved_to}`);
  }
  return names;
}

/** The body for one node, checked as the node will check it; a refusal names the node and the field. */
export function compose(
  record: NodeRecord,
  input: PushInput,
  extra: Record<string, unknown> = {},
  now = new Date(),
): Composed {
  const node = record.node;
  if (!record.keys) throw new MeshRefused(`node ${node} has not enrolled yet: there is no key to seal to`);
  const named = input.file.node;
  if (named !== undefined && named !== node)
    throw new MeshRefused(
      `the declaration names node ${JSON.stringify(named).slice(0, 70)}, not ${node}: push it to that node, or leave "node" out`,
    );
  const { serial: _s, issued_at: _i, to: _t, ...rest } = input.file;
  const secrets = { ...((rest.secrets as Record<string, unknown> | undefined) ?? {}) };
  for (const [name, value] of input.secrets) secrets[name] = seal(value, record.keys.sealing);
  const kept: Record<string, unknown> = {
    ...rest,
    node,
    ...(Object.keys(secrets).length ? { secrets } : {}),
  };
  delete kept.membership;
  const serial = record.serial + 1;
  const body = JSON.stringify({
    ...kept,
    ...extra,
    // addressed to the key the node enrolled with: after `node rm` and `node add`, nothing signed for the
    // name's earlier life (whose serials this one repeats) applies to the node enrolled now
    to: record.keys.identity,
    serial,
    issued_at: now.toISOString().replace(/\.\d{3}Z$/, "Z"),
  });
  const parsed = parseDeclarationBody(body);
  if (!parsed.ok) {
    const more = parsed.refusals.length > 1 ? ` (and ${parsed.refusals.length - 1} more)` : "";
    throw new MeshRefused(`refused for node ${node}: ${refusalLine(parsed.refusals[0]!)}${more}`);
  }
  checkSecretsUsed(parsed.value, input.secrets);
  checkNoInstallerSecret(parsed.value, node);
  return { node, serial, body, digest: digestOf(body), to: record.keys.identity, kept };
}

/** A `--secret` no resource reads (its kind says which it reads) would be sent for nothing: a misspelt name, most likely. */
function checkSecretsUsed(declaration: Declaration, given: ReadonlyMap<string, Uint8Array>): void {
  const read = new Set(declaration.resources.flatMap((r) => secretsOf(r).map((s) => s.name)));
  for (const name of given.keys())
    if (!read.has(name))
      throw new MeshRefused(`--secret ${name}: no resource of the declaration reads secret "${name}"`);
}

/**
 * `"installer"` stands for a secret handed to genesis on the machine: a node never opens one that arrives over
 * the link, so sending it would only use a serial for a refusal. `--secret NAME=FILE` seals the value instead.
 */
function checkNoInstallerSecret(declaration: Declaration, node: string): void {
  const name = Object.entries(declaration.secrets ?? {}).find(([, v]) => v === INSTALLER_SECRET)?.[0];
  if (name !== undefined)
    throw new MeshRefused(
      `refused for node ${node}: secret "${name}" is "${INSTALLER_SECRET}", which only genesis on the machine is given; seal it with --secret ${name}=FILE`,
    );
}

/**
 * Compose for every target (refused: nothing happened), then take each node's next serial by compare-and-set on
 * its record (another operator pushing at the same moment takes the one after: never one serial on two bodies),
 * keeping the push in the record before anything is published: a push that dies between the two leaves a gap in
 * the order, never a serial used twice.
 */
export async function preparePush(
  state: State,
  targets: string[],
  input: PushInput,
  extra: (record: NodeRecord) => Record<string, unknown> = () => ({}),
  /** Runs once every check has passed, before any serial is taken (a move's other mesh). */
  beforeCommit: () => Promise<void> = async () => {},
): Promise<Composed[]> {
  const records = await knownNodes(state, targets);
  const dropped = records.map(({ value: record }) => {
    const c = compose(record, input, extra(record));
    return { node: record.node, gone: droppedBy(record, c.kept) };
  });
  if (!input.allowRemovals) refuseRemovals(dropped);
  await beforeCommit();
  const composed: Composed[] = [];
  // one after another: the nodes bucket takes its writes one at a time (kv.ts), so more at once would only lose
  // races; each starts from the record just read, so a push reads no record twice unless another writer changed it
  for (const first of records) {
    const { result, entry } = await changedNode(
      state,
      first.key,
      (record) => {
        const c = compose(record, input, extra(record));
        const push = { serial: c.serial, digest: c.digest, seq: null, at: new Date().toISOString() };
        const pushes = [...record.pushes, push].slice(-PUSHES_KEPT);
        return { value: { ...record, serial: c.serial, last_body: c.kept, pushes }, result: c };
      },
      first,
    );
    composed.push({ ...result, record: entry });
  }
  return composed;
}

/** Told when the wait for reports begins (`node` null) and as each node's report arrives. */
export type ReportHeard = (reported: number, of: number, node: string | null, outcome?: string) => void;

/** Listen for the targets' reports, then publish each signed envelope; the stream sequence of each. */
export async function publishAndWait(
  mesh: MeshDir,
  state: State,
  composed: Composed[],
  waitMs: number,
  heard: ReportHeard = () => {},
): Promise<Pushed[]> {
  const bus = state.bus;
  const tally = new ReportTally(composed, heard);
  const subs = composed.map((c) =>
    bus.nc.subscribe(reportSubject(c.node), {
      callback: (err, m) => {
        // only the node's own signed word answers a push: a forged report is no answer
        const r = err ? null : heardFrom(c.node, c.to, m.data, "report");
        if (r?.ok) tally.heard(c, r.value);
      },
    }),
  );
  try {
    await flushed(bus.nc, "the connection to the bus closed before it took the reports' subscription");
    const key = mesh.signingKey();
    const publish = async (c: Composed) => {
      const envelope = signEnvelope(c.body, key);
      try {
        const ack = await publishDeclaration(bus, c.node, new TextEncoder().encode(JSON.stringify(envelope)));
        tally.published(c, ack.seq);
      } catch (e) {
        throw new Error(`publishing to node ${c.node} failed: ${firstLine(e)}`);
      }
    };
    for (let i = 0; i < composed.length; i += PUSH_PUBLISH_BATCH)
      await Promise.all(composed.slice(i, i + PUSH_PUBLISH_BATCH).map(publish));
    const unrecorded = await recordSeqs(state, composed, tally.seqs);
    if (waitMs > 0) await tally.settled(waitMs);
    const pushed: Pushed[] = [];
    for (const c of composed) {
      const later = tally.replacedBy(c);
      pushed.push({
        ...c,
        seq: tally.seqs.get(c.node)!,
        report: tally.reportOf(c),
        replacedBy: later && (await replacing(state, c.node, later)),
        unrecorded: unrecorded.get(c.node) ?? null,
      });
    }
    return pushed;
  } finally {
    for (const s of subs) s.unsubscribe();
  }
}

/**
 * What the targets reported while a push waits: each push's own report, or a later declaration's that says the
 * node will never take this one. Settled when every target has one or the other.
 */
class ReportTally {
  private readonly byDigest = new Map<string, Report>();
  private readonly later: Later = new Map();
  readonly seqs = new Map<string, number>();
  private readonly wanted: Set<string>;
  private done: () => void = () => {};
  private readonly all = new Promise<void>((r) => (this.done = r));

  constructor(
    private readonly composed: Composed[],
    private readonly told: ReportHeard,
  ) {
    this.wanted = new Set(composed.map((c) => c.digest));
  }

  heard(c: Composed, report: Report): void {
    const { digest, seq } = report.declaration;
    if (!this.wanted.has(digest)) {
      if (seq > (this.later.get(c.node)?.seq ?? 0)) this.later.set(c.node, { seq, digest });
      if (this.replacedBy(c)) this.told(this.byDigest.size, this.wanted.size, c.node, "replaced");
    } else if (!this.byDigest.has(digest)) {
      this.byDigest.set(digest, report);
      this.told(this.byDigest.size, this.wanted.size, c.node, report.outcome);
    } else this.byDigest.set(digest, report);
    this.settle();
  }

  published(c: Composed, seq: number): void {
    this.seqs.set(c.node, seq);
  }

  reportOf(c: Composed): Report | null {
    return this.byDigest.get(c.digest) ?? null;
  }

  /** The later declaration the node reported, when it has not reported this push's own. */
  replacedBy(c: Composed): { seq: number; digest: string } | null {
    const later = this.later.get(c.node);
    const mine = this.seqs.get(c.node);
    return !this.byDigest.has(c.digest) && later && mine !== undefined && later.seq > mine ? later : null;
  }

  /** Until every target is settled, or `waitMs` is spent. */
  async settled(waitMs: number): Promise<void> {
    if (this.byDigest.size < this.wanted.size) this.told(this.byDigest.size, this.wanted.size, null);
    this.settle();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.all, new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
    clearTimeout(timer);
  }

  private settle(): void {
    if (this.composed.every((c) => this.byDigest.has(c.digest) || this.replacedBy(c))) this.done();
  }
}

/** What became of a push a later declaration replaced, in one line. */
export function replacedLine(by: NonNullable<Pushed["replacedBy"]>): string {
  const which =
    by.serial === null ? `a later declaration (DECLARE message ${by.seq})` : `serial ${by.serial}`;
  return `replaced by ${which} before the node took it`;
}

/** The later declaration's serial, from the pushes the node's record keeps. */
async function replacing(
  state: State,
  node: string,
  newer: { seq: number; digest: string },
): Promise<{ serial: number | null; seq: number }> {
  const record = await knownNode(state, node).catch(() => null);
  const push = record?.value.pushes.find((p) => p.digest === newer.digest);
  return { serial: push?.serial ?? null, seq: newer.seq };
}

/**
 * Each push's stream sequence into its record (a node removed meanwhile has none to keep it), starting from the
 * record as the push's serial left it: read again only where another writer changed it since. A write the bus did
 * not take ends the recording, and why is kept for that node and every one after it: its declarations are out,
 * and a push is not failed, nor made to wait 15 s a node, for its own bookkeeping.
 */
async function recordSeqs(
  state: State,
  composed: Composed[],
  seqs: Map<string, number>,
): Promise<Map<string, string>> {
  const unrecorded = new Map<string, string>();
  let why: string | null = null;
  for (const c of composed) {
    if (why !== null) {
      unrecorded.set(c.node, why);
      continue;
    }
    const seq = seqs.get(c.node) ?? null;
    await changedNode(
      state,
      c.node,
      (record) => ({
        value: { ...record, pushes: record.pushes.map((p) => (p.digest === c.digest ? { ...p, seq } : p)) },
        result: undefined,
      }),
      c.record,
    ).catch((e) => {
      if (e instanceof MeshRefused) return;
      // a record other writers kept changing is that node's alone; a bus not taking writes is every node's
      if (!(e instanceof Conflict)) why = firstLine(e);
      unrecorded.set(c.node, firstLine(e));
    });
  }
  return unrecorded;
}

/** What a push left out of the nodes' records, in one line; null when it kept everything. */
export function unrecordedLine(pushed: Pushed[]): string | null {
  const missed = pushed.filter((p) => p.unrecorded !== null);
  if (!missed.length) return null;
  const which = missed.length === pushed.length ? "pushes" : `of ${pushed.length} pushes`;
  return `the stream sequences of ${missed.length} ${which} were not recorded (${missed[0]!.unrecorded}): they were published and their reports count; their nodes' heartbeats show no serial until the next push`;
}

/** 0 every node applied; 2 one refused; 1 one failed or was set aside (or replaced); 3 one said nothing in time. */
export function exitOf(pushed: Pushed[]): number {
  const outcomes = pushed.map((p) => p.report?.outcome ?? (p.replacedBy ? "superseded" : null));
  if (outcomes.includes("refused")) return 2;
  if (outcomes.some((o) => o === "failed" || o === "superseded")) return 1;
  if (outcomes.includes(null)) return 3;
  return 0;
}
