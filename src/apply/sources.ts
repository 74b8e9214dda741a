// The three ways a declaration reaches the machine: delivered by the link, kept and applied again (the drift
// timer, `reconcile`), given as a file (`apply`, `plan`, `genesis`). This is the one place that takes the state
// lock for an apply, for every caller, and the one place a signed envelope is verified: once per delivery, its
// bytes parsed once, so no caller can forget either or do it twice.
import { acquireLock, admitInOrder, loadIdentity, publicB64, type State } from "../store/index.ts";
import {
  type Declaration,
  digestOf,
  type Membership,
  type Outcome,
  type Refusal,
  verifyEnvelope,
} from "../vocabulary/index.ts";
import { type ApplyRequest, type ApplyResult, applyDeclaration, reportWithoutSteps } from "./apply.ts";

/** The machine's parts every apply is handed. */
export type Machine = Pick<ApplyRequest, "host" | "state" | "originals" | "ports" | "unseal">;

/** A node's parts: the machine, its name, and the membership whose mesh key signs what it is sent. */
export type NodeParts = Machine & { node: string; membership: Membership };

/** What a caller may ask of an apply besides what it applies: the plan shown, progress, Ctrl-C, a dry run. */
export type ApplyOptions = Partial<Pick<ApplyRequest, "dryRun" | "diff" | "signal" | "onPlan" | "onStep">>;

/** A message the link delivered, as the run loop hands it on: set aside (superseded) when newer ones wait behind it. */
export interface Arrival {
  seq: number;
  data: Uint8Array;
  superseded: boolean;
}

/**
 * A delivered message, start to end: verified; superseded or refused with nothing touched; else judged by its signed
 * order and kept as the node's declaration under the lock before it applies, so a drift check or a crash mid-apply
 * resumes from the newest.
 */
export async function applyDelivered(node: NodeParts, d: Arrival): Promise<ApplyResult> {
  const meshKey = node.membership.mesh_key;
  const identity = loadIdentity(node.state.dir);
  // a node without its identity key cannot tell what is addressed to it: every delivery is refused, said why
  if (!identity.ok)
    return refused(node, d.seq, digestOf(d.data), [
      { id: "declaration", field: "to", reason: identity.reason },
    ]);
  const verified = verifyEnvelope(d.data, {
    meshKey,
    node: node.node,
    identity: publicB64(identity.pair.publicKey),
    support: node.host.support,
  });
  // superseded whatever it holds: a newer one waits, and this one is settled unapplied
  if (d.superseded) return refused(node, d.seq, verified.digest, [], "superseded");
  if (!verified.ok) return refused(node, d.seq, verified.digest, verified.refusals);
  return underLock(node.state, false, async () => {
    const admitted = admitInOrder(node.state, meshKey, verified.declaration, verified.digest);
    if (!admitted.ok) return refused(node, d.seq, verified.digest, [admitted.refusal]);
    node.state.writeDeclared({
      seq: d.seq,
      digest: verified.digest,
      received_at: new Date().toISOString(),
      mesh_key: meshKey,
      envelope: verified.envelope,
    });
    return applySigned(node, verified.declaration, d.seq, verified.digest, {});
  });
}

/**
 * The kept declaration applied again, verified again against the key it arrived under (the drift timer and
 * `reconcile` apply only what the mesh signed), and read only once the lock is held: a `reconcile` that waited for
 * the lock while `run` applied a newer delivery applies that one, never the one it would have read before. Null
 * when the mesh has sent nothing yet.
 */
export async function applyKept(node: NodeParts, opts: ApplyOptions = {}): Promise<ApplyResult | null> {
  return underLock(node.state, opts.dryRun, async () => {
    const kept = node.state.readDeclared();
    if (!kept) return null;
    const verified = verifyEnvelope(Buffer.from(JSON.stringify(kept.envelope)), {
      meshKey: kept.mesh_key ?? node.membership.mesh_key,
      node: node.node,
      support: node.host.support,
    });
    if (!verified.ok) return refused(node, kept.seq, verified.digest, verified.refusals);
    return applySigned(node, verified.declaration, kept.seq, verified.digest, opts);
  });
}

/**
 * A declaration given as a file (never signed, never judged by an order), under the lock; `record` notes what the
 * caller keeps of it (genesis, its bundle's digest) while the lock is still held.
 */
export async function applyFile(
  machine: Machine,
  file: { declaration: Declaration; bytes: Uint8Array },
  opts: ApplyOptions & { record?: (result: ApplyResult) => void } = {},
): Promise<ApplyResult> {
  return underLock(machine.state, opts.dryRun, async () => {
    const result = await applyDeclaration({
      ...machineOf(machine),
      ...optionsOf(opts),
      declaration: file.declaration,
      seq: 0,
      digest: digestOf(file.bytes),
      source: "file",
    });
    opts.record?.(result);
    return result;
  });
}

/** A dry run changes nothing, so it neither takes the lock nor waits for one that does. */
async function underLock<T>(state: State, dryRun: boolean | undefined, fn: () => Promise<T>): Promise<T> {
  const lock = dryRun ? null : await acquireLock(state.ensure().dir);
  try {
    return await fn();
  } finally {
    lock?.release();
  }
}

/** A signed declaration applied; the release it names for the host itself is the run loop's to fetch (run/upgrade.ts). */
async function applySigned(
  node: NodeParts,
  declaration: Declaration,
  seq: number,
  digest: string,
  opts: ApplyOptions,
): Promise<ApplyResult> {
  const result = await applyDeclaration({
    ...machineOf(node),
    ...optionsOf(opts),
    declaration,
    seq,
    digest,
    source: "link",
  });
  return declaration.host ? { ...result, release: declaration.host.release } : result;
}

function refused(
  node: NodeParts,
  seq: number,
  digest: string,
  refusals: Refusal[],
  outcome: Outcome = "refused",
): ApplyResult {
  return {
    report: reportWithoutSteps(node.node, seq, digest, refusals, node.host, outcome),
    plan: [],
    exit: outcome === "refused" ? 2 : 0,
  };
}

// Named, not spread: a node's parts carry more (its name, the membership) than an apply is handed.
function machineOf(m: Machine): Machine {
  return { host: m.host, state: m.state, originals: m.originals, ports: m.ports, unseal: m.unseal };
}

function optionsOf(o: ApplyOptions): ApplyOptions & { dryRun: boolean } {
  return { dryRun: o.dryRun ?? false, diff: o.diff, signal: o.signal, onPlan: o.onPlan, onStep: o.onStep };
}
