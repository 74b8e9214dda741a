// `apply FILE [--dry-run]` and `plan FILE`: the offline path, for a machine the mesh has not spoken to.
import { applyDeclaration } from "../../apply/index.ts";
import { acquireLock } from "../../store/index.ts";
import { digestOf } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { type Context, portsOf, Refused, readDeclarationFile } from "../context.ts";
import { summary, table, writeJson, writeOut } from "../output.ts";

export async function applyCommand(ctx: Context, dryRun: boolean): Promise<number> {
  const [file, ...extra] = ctx.args.positionals;
  if (!file) throw new UsageError(`${ctx.args.command} needs a declaration FILE`);
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const { declaration, bytes } = readDeclarationFile(file, ctx.host);
  if (ctx.state.hasDeclared())
    throw new UsageError(
      "apply FILE is for a machine the mesh has not spoken to; this node holds a declaration from the mesh (use `mesh-host reconcile`)",
    );
  const lock = dryRun ? null : await acquireLock(ctx.state.ensure().dir);
  try {
    const result = await applyDeclaration({
      declaration,
      seq: 0,
      digest: digestOf(bytes),
      source: "file",
      dryRun,
      host: ctx.host,
      state: ctx.state,
      holds: ctx.holds,
      ports: portsOf(ctx),
      unseal: ctx.unseal,
      onPlan: ctx.args.json ? undefined : (plan) => writeOut(`plan:\n${table(plan)}`),
    });
    if (result.exit === 2) throw new Refused(result.report.refusals);
    if (ctx.args.json)
      writeJson(dryRun ? { plan: result.plan } : { plan: result.plan, report: result.report });
    else if (dryRun) writeOut(`plan (dry run, nothing changed):\n${table(result.plan)}`);
    else writeOut(`report:\n${table(result.report.steps)}${summary(result.report)}`);
    ctx.log.info(
      { outcome: result.report.outcome, digest: result.report.declaration.digest },
      "apply finished",
    );
    return result.exit;
  } finally {
    lock?.release();
  }
}
