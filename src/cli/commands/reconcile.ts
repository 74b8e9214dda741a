// `reconcile [BUNDLE] [--dry-run]`: the mesh's last signed declaration applied again now, under the lock; shown before it acts.
import { applyKept, CHANGING, modeRefusal } from "../../apply/index.ts";
import { Outbox } from "../../store/index.ts";
import { type Declaration, digestOf } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { type Context, checkGiven, portsOf, Refused, readDeclarationFile } from "../context.ts";
import { writeOut } from "../output.ts";
import { applyHooks, applyOffline, logOutcome, showResult } from "./apply.ts";

/**
 * A bundle given to reconcile is checked, never trusted: its mode against the node's, its bytes against what
 * genesis applied. Once the mesh has spoken the bundle is never applied (seed: hq issue 104, the night the
 * genesis bundle was re-applied in the wrong mode).
 */
function checkBundle(ctx: Context): { declaration: Declaration; bytes: Buffer } | null {
  const [file, ...extra] = ctx.args.positionals;
  if (!file) return null;
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const bundle = readDeclarationFile(file, ctx.host);
  const recorded = ctx.state.readNode()?.mode;
  if (recorded && bundle.declaration.mode !== recorded)
    throw new Refused([modeRefusal(bundle.declaration.mode, recorded)]);
  const consumed = ctx.state.readGenesis();
  const digest = digestOf(bundle.bytes);
  checkGiven(ctx, bundle.declaration);
  if (consumed?.digest !== digest) {
    const why = consumed
      ? `is not what genesis applied (sha256 ${digest.slice(0, 12)}, genesis applied ${consumed.digest.slice(0, 12)})`
      : "was never applied by genesis on this node";
    throw new Refused([{ id: "declaration", field: "bundle", reason: why }]);
  }
  return bundle;
}

export async function reconcileCommand(ctx: Context): Promise<number> {
  const bundle = checkBundle(ctx);
  const kept = ctx.state.readDeclared();
  if (bundle && !kept) return applyOffline(ctx, bundle.declaration, bundle.bytes, ctx.args.dryRun);
  const membership = ctx.state.readMembership();
  const node = ctx.state.readNode();
  if (!membership || !node || !kept)
    throw new UsageError(
      "this node holds no declaration from the mesh to reconcile (give the bundle genesis applied)",
    );
  if (ctx.given.size)
    throw new UsageError(
      "--secret is for a bundle, and the mesh has spoken: its declaration carries its secrets sealed",
    );
  if (bundle && !ctx.args.json)
    writeOut("the mesh has spoken: its last signed declaration is reconciled, never the bundle");
  const dryRun = ctx.args.dryRun;
  const outbox = new Outbox(ctx.state);
  const parts = {
    state: ctx.state,
    originals: ctx.originals,
    host: ctx.host,
    ports: portsOf(ctx),
    unseal: ctx.unseal,
    node: node.node,
    membership,
  };
  // read again under the lock: `run` may apply a newer delivery while this waits for it
  const { verbose } = ctx.args;
  const hooks = applyHooks(ctx, dryRun, verbose);
  const applied = await applyKept(parts, { dryRun, ...hooks.options }).finally(() => hooks.done());
  if (!applied) throw new UsageError("this node holds no declaration from the mesh to reconcile");
  const result = applied;
  if (result.exit === 2) throw new Refused(result.report.refusals);
  // said to the mesh by the running host's next flush, like any report made while the bus is away
  const said =
    result.report.outcome !== "applied" ||
    result.report.steps.some((s) => CHANGING.has(s.did)) ||
    result.report.notes;
  if (!dryRun && said) outbox.put(result.report);
  if (!dryRun) logOutcome(ctx, result.report);
  showResult(ctx, result, dryRun, verbose);
  return result.exit;
}
