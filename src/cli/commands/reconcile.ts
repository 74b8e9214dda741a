// `reconcile [--dry-run]`: the mesh's last signed declaration, applied again now, under the lock; shown before it acts.

import { CHANGING } from "../../apply/index.ts";
import { applyDelivered, keptEnvelope } from "../../hold/index.ts";
import { Outbox } from "../../store/index.ts";
import { UsageError } from "../args.ts";
import { type Context, portsOf, Refused } from "../context.ts";
import { summary, table, writeJson, writeOut } from "../output.ts";

export async function reconcileCommand(ctx: Context): Promise<number> {
  if (ctx.args.positionals.length)
    throw new UsageError("reconcile takes no FILE: it applies the mesh's last declaration");
  const membership = ctx.state.readMembership();
  const node = ctx.state.readNode();
  const kept = keptEnvelope(ctx.state);
  if (!membership || !node || !kept)
    throw new UsageError("this node holds no declaration from the mesh to reconcile");
  const dryRun = ctx.args.dryRun;
  const outbox = new Outbox(ctx.state);
  const deps = {
    state: ctx.state,
    holds: ctx.holds,
    outbox,
    host: ctx.host,
    ports: portsOf(ctx),
    unseal: ctx.unseal,
    node: node.node,
    membership,
  };
  const result = await applyDelivered(deps, kept.seq, kept.bytes, {
    keep: false,
    meshKey: kept.meshKey,
    dryRun,
    onPlan: ctx.args.json ? undefined : (plan) => writeOut(`plan:\n${table(plan)}`),
  });
  if (result.exit === 2) throw new Refused(result.report.refusals);
  // said to the mesh by the running host's next flush, like any report made while the bus is away
  if (
    !dryRun &&
    (result.report.outcome !== "applied" || result.report.steps.some((s) => CHANGING.has(s.did)))
  )
    outbox.put(result.report);
  if (ctx.args.json) writeJson(dryRun ? { plan: result.plan } : { plan: result.plan, report: result.report });
  else if (dryRun) writeOut(`plan (dry run, nothing changed):\n${table(result.plan)}`);
  else writeOut(`report:\n${table(result.report.steps)}${summary(result.report)}`);
  return result.exit;
}
