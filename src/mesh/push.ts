// `mesh push`: the declaration in FILE, for each target node — its secrets sealed to that node's key, its
// `node`, next `serial` and `issued_at` set, checked by the host's own vocabulary, signed, published — and the
// reports waited for. Every check runs before anything is sent or any serial is used: a refused push
// changes nothing, here or on the bus.

import { PUSHES_KEPT } from "../defaults.ts";
import {
  type Declaration,
  declareSubject,
  digestOf,
  INSTALLER_SECRET,
  parseDeclarationBody,
  parseJsonBytes,
  type Report,
  Report as ReportSchema,
  refusalLine,
  reportSubject,
  seal,
  signEnvelope,
} from "../vocabulary/index.ts";
import { type Bus, connectBus, firstLine, jsCall } from "./bus.ts";
import { lockMesh } from "./files.ts";
import { type MeshDir, MeshRefused, type NodeRecord } from "./layout.ts";
import { droppedBy, refuseRemovals } from "./removals.ts";

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
  /** What a later move carries again: the declaration as pushed, without its order. */
  kept: Record<string, unknown>;
}

export interface Pushed extends Composed {
  seq: number;
  report: Report | null;
}

/** Every target named and enrolled, or a refusal naming the first that is not. */
export function targetsOf(mesh: MeshDir, names: string[], all: boolean): string[] {
  if (all) {
    const enrolled = mesh
      .nodes()
      .filter((r) => r.keys && !r.moved_to)
      .map((r) => r.node);
    if (!enrolled.length) throw new MeshRefused("--all: no node of this mesh has enrolled yet");
    return enrolled;
  }
  if (new Set(names).size !== names.length) throw new MeshRefused("a node is named twice");
  for (const n of names) {
    const r = mesh.known(n);
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
  const { serial: _s, issued_at: _i, ...rest } = input.file;
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
  return { node, serial, body, digest: digestOf(body), kept };
}

/** A `--secret` no file resource names would be sealed and sent for nothing: a misspelt name, most likely. */
function checkSecretsUsed(declaration: Declaration, given: ReadonlyMap<string, Uint8Array>): void {
  for (const name of given.keys())
    if (!declaration.resources.some((r) => r.type === "file" && r.secret === name))
      throw new MeshRefused(`--secret ${name}: no file resource of the declaration names secret "${name}"`);
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
 * Compose for every target (refused: nothing happened), then, under the lock and with the bus reached, take the
 * serials, keep them durably, and publish. The serial is written before the publish: a push that dies between
 * the two leaves a gap in the order, never one serial on two bodies.
 */
export async function preparePush(
  mesh: MeshDir,
  targets: string[],
  input: PushInput,
  extra: (record: NodeRecord) => Record<string, unknown> = () => ({}),
  /** Runs once every check has passed and the bus answers, before any serial is taken (a move's other mesh). */
  beforeCommit: () => Promise<void> = async () => {},
): Promise<{ bus: Bus; composed: Composed[] }> {
  const checked = targets.map((n) => compose(mesh.known(n), input, extra(mesh.known(n))));
  if (!input.allowRemovals)
    refuseRemovals(checked.map((c) => ({ node: c.node, gone: droppedBy(mesh.known(c.node), c.kept) })));
  const bus = await connectBus(mesh);
  let lock: Awaited<ReturnType<typeof lockMesh>> | null = null;
  let composed: Composed[];
  try {
    await beforeCommit();
    lock = await lockMesh(mesh.dir);
    composed = targets.map((n) => compose(mesh.known(n), input, extra(mesh.known(n))));
    // again under the lock: another push may have changed what a node last had
    if (!input.allowRemovals)
      refuseRemovals(composed.map((c) => ({ node: c.node, gone: droppedBy(mesh.known(c.node), c.kept) })));
    for (const c of composed) {
      const record = mesh.known(c.node);
      mesh.writeNode({
        ...record,
        serial: c.serial,
        last_body: c.kept,
        pushes: [
          ...record.pushes,
          { serial: c.serial, digest: c.digest, seq: null, at: new Date().toISOString() },
        ].slice(-PUSHES_KEPT),
      });
    }
  } catch (e) {
    await bus.close();
    throw e;
  } finally {
    lock?.release();
  }
  return { bus, composed };
}

/** Listen for the targets' reports, then publish each signed envelope; the stream sequence of each. */
/** Told when the wait for reports begins (`node` null) and as each node's report arrives. */
export type ReportHeard = (reported: number, of: number, node: string | null, outcome?: string) => void;

export async function publishAndWait(
  mesh: MeshDir,
  bus: Bus,
  composed: Composed[],
  waitMs: number,
  heard: ReportHeard = () => {},
): Promise<Pushed[]> {
  const byDigest = new Map<string, Report>();
  const wanted = new Set(composed.map((c) => c.digest));
  let done: () => void = () => {};
  const all = new Promise<void>((r) => (done = r));
  const subs = composed.map((c) =>
    bus.nc.subscribe(reportSubject(c.node), {
      callback: (err, m) => {
        if (err) return;
        const json = parseJsonBytes(m.data);
        const r = json.ok ? ReportSchema.safeParse(json.value) : null;
        if (!r?.success || !wanted.has(r.data.declaration.digest) || r.data.node !== c.node) return;
        const first = !byDigest.has(r.data.declaration.digest);
        byDigest.set(r.data.declaration.digest, r.data);
        if (first) heard(byDigest.size, wanted.size, c.node, r.data.outcome);
        if (byDigest.size === wanted.size) done();
      },
    }),
  );
  try {
    await bus.nc.flush();
    const key = mesh.signingKey();
    const seqs = new Map<string, number>();
    for (const c of composed) {
      const envelope = signEnvelope(c.body, key);
      try {
        seqs.set(
          c.node,
          (await jsCall(() => bus.js.publish(declareSubject(c.node), JSON.stringify(envelope)))).seq,
        );
      } catch (e) {
        throw new Error(`publishing to node ${c.node} failed: ${firstLine(e)}`);
      }
    }
    await recordSeqs(mesh, composed, seqs);
    if (waitMs > 0) {
      if (byDigest.size < wanted.size) heard(byDigest.size, wanted.size, null);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([all, new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
      clearTimeout(timer);
    }
    return composed.map((c) => ({ ...c, seq: seqs.get(c.node)!, report: byDigest.get(c.digest) ?? null }));
  } finally {
    for (const s of subs) s.unsubscribe();
  }
}

async function recordSeqs(mesh: MeshDir, composed: Composed[], seqs: Map<string, number>): Promise<void> {
  const lock = await lockMesh(mesh.dir);
  try {
    for (const c of composed) {
      const record = mesh.node(c.node);
      if (!record) continue;
      mesh.writeNode({
        ...record,
        pushes: record.pushes.map((p) =>
          p.digest === c.digest ? { ...p, seq: seqs.get(c.node) ?? null } : p,
        ),
      });
    }
  } finally {
    lock.release();
  }
}

/** 0 every node applied; 2 one refused; 1 one failed or was set aside; 3 one said nothing in time. */
export function exitOf(pushed: Pushed[]): number {
  const outcomes = pushed.map((p) => p.report?.outcome ?? null);
  if (outcomes.includes("refused")) return 2;
  if (outcomes.some((o) => o === "failed" || o === "superseded")) return 1;
  if (outcomes.includes(null)) return 3;
  return 0;
}
