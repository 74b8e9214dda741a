// Applying what the mesh sends, under the lock: verify, apply, keep, report into the outbox.
import { createHash } from "node:crypto";
import { closeSync, openSync, readSync, statSync } from "node:fs";
import type { Ports } from "../appliers/index.ts";
import type { PlanLine, Unseal } from "../apply/index.ts";
import { applyDeclaration, refusedReport } from "../apply/index.ts";
import { HASH_CHUNK_BYTES } from "../defaults.ts";
import type { Host } from "../hosts/index.ts";
import { acquireLock, admitInOrder, type Outbox, type State, type StoreOriginals } from "../store/index.ts";
import { type Membership, type Report, verifyEnvelope } from "../vocabulary/index.ts";

export interface NodeDeps {
  state: State;
  originals: StoreOriginals;
  outbox: Outbox;
  host: Host;
  ports: Omit<Ports, "originals">;
  unseal: Unseal;
  node: string;
  membership: Membership;
}

export interface Applied {
  report: Report;
  plan: PlanLine[];
  exit: 0 | 1 | 2;
  /** The bus a move takes the node to, when the declaration carried one and it applied. */
  move?: Membership;
}

/**
 * A delivered message, start to end: refused (nothing touched) or applied; its order and the envelope are kept
 * as the node's declaration before the apply, so a drift check or a crash mid-apply resumes from the newest.
 */
export interface DeliveredOptions {
  /** Keep the envelope as the node's declaration (a delivery); false for the kept one applied again. */
  keep?: boolean;
  dryRun?: boolean;
  /** Each planned file write carries its diff (`reconcile --diff`). */
  diff?: boolean;
  /** Aborted: the step in progress finishes, the rest are not reached. */
  signal?: AbortSignal;
  onPlan?: (plan: PlanLine[]) => void;
  onStep?: (done: number, total: number) => void;
  /** Verify against this key instead of the membership's: the kept declaration's own. */
  meshKey?: string;
  /** The caller holds the state lock already (applyKept): the lock is not re-entrant. */
  locked?: boolean;
}

export async function applyDelivered(
  deps: NodeDeps,
  seq: number,
  data: Uint8Array,
  opts: DeliveredOptions = {},
): Promise<Applied> {
  const { keep = true, dryRun = false } = opts;
  const meshKey = opts.meshKey ?? deps.membership.mesh_key;
  const verified = verifyEnvelope(data, {
    meshKey,
    node: deps.node,
    support: deps.host.support,
  });
  if (!verified.ok)
    return {
      report: refusedReport(deps.node, seq, bodyDigest(data), verified.refusals, deps.host),
      plan: [],
      exit: 2,
    };
  const lock = dryRun || opts.locked ? null : await acquireLock(deps.state.ensure().dir);
  try {
    // a delivery is judged by its signed order under the lock, and a newer one kept before anything applies;
    // the kept one applied again was judged when it came
    const admitted = keep
      ? admitInOrder(deps.state, meshKey, verified.declaration, verified.digest, dryRun)
      : null;
    if (admitted && !admitted.ok)
      return {
        report: refusedReport(deps.node, seq, verified.digest, [admitted.refusal], deps.host),
        plan: [],
        exit: 2,
      };
    if (keep && !dryRun)
      deps.state.writeDeclared({
        seq,
        digest: verified.digest,
        received_at: new Date().toISOString(),
        mesh_key: meshKey,
        envelope: JSON.parse(Buffer.from(data).toString("utf8")),
      });
    const result = await applyDeclaration({
      declaration: verified.declaration,
      seq,
      digest: verified.digest,
      source: "link",
      dryRun,
      diff: opts.diff,
      signal: opts.signal,
      onPlan: opts.onPlan,
      onStep: opts.onStep,
      host: deps.host,
      state: deps.state,
      originals: deps.originals,
      ports: deps.ports,
      unseal: deps.unseal,
    });
    return {
      report: result.report,
      plan: result.plan,
      exit: result.exit,
      move: dryRun ? undefined : result.moveTo,
    };
  } finally {
    lock?.release();
  }
}

/**
 * The kept declaration applied again, read only once the lock is held: a `reconcile` that waited for the lock
 * while `run` applied a newer delivery applies that one, never the one it read before it waited.
 */
export async function applyKept(
  deps: NodeDeps,
  opts: Omit<DeliveredOptions, "keep" | "meshKey" | "locked"> = {},
): Promise<Applied | null> {
  const lock = opts.dryRun ? null : await acquireLock(deps.state.ensure().dir);
  try {
    const kept = keptEnvelope(deps.state);
    if (!kept) return null;
    return await applyDelivered(deps, kept.seq, kept.bytes, {
      ...opts,
      keep: false,
      meshKey: kept.meshKey,
      locked: true,
    });
  } finally {
    lock?.release();
  }
}

/** The SHA-256 of an envelope's body when it has one (what reports name), else of the bytes themselves. */
export function bodyDigest(data: Uint8Array): string {
  try {
    const body = (JSON.parse(Buffer.from(data).toString("utf8")) as { body?: unknown }).body;
    if (typeof body === "string") return createHash("sha256").update(body).digest("hex");
  } catch {
    // not JSON: the bytes are all there is
  }
  return createHash("sha256").update(data).digest("hex");
}

/** The kept declaration, verified again: the drift timer and `reconcile` apply only what the mesh signed. */
export function keptEnvelope(state: State): { seq: number; bytes: Buffer; meshKey?: string } | null {
  const kept = state.readDeclared();
  if (!kept) return null;
  return { seq: kept.seq, bytes: Buffer.from(JSON.stringify(kept.envelope)), meshKey: kept.mesh_key };
}

/** SHA-256 of the file at `path`: the binary's identity for `confirmed` and for noticing an upgrade. */
export function digestOfFile(path: string): string | null {
  // in chunks: reading a 100 MB executable whole cost the running host 100 MB of RSS for ever after
  let fd: number | null = null;
  try {
    fd = openSync(path, "r");
    const hash = createHash("sha256");
    const chunk = Buffer.allocUnsafe(HASH_CHUNK_BYTES);
    for (let n = readSync(fd, chunk); n > 0; n = readSync(fd, chunk)) hash.update(chunk.subarray(0, n));
    return hash.digest("hex");
  } catch {
    return null;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** A cheap fingerprint of a file's identity, so the digest is recomputed only when the file was replaced. */
export function fileStamp(path: string): string {
  try {
    const st = statSync(path);
    return `${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return "gone";
  }
}
