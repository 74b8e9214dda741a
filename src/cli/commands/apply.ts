// `apply FILE [--dry-run]`, `plan FILE` and `genesis BUNDLE --mode M`: the offline path, for a machine the mesh has not spoken to.
import { type ApplyResult, applyFile, modeRefusal, type PlanLine } from "../../apply/index.ts";
import { type Declaration, digestOf, type Report } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { type Context, checkGiven, portsOf, Refused, readDeclarationFile } from "../context.ts";
import { planText, progress, reportText, writeJson, writeOut } from "../output.ts";

/** The one FILE a command takes, parsed; refused once the mesh has spoken, since its word is the node's now. */
export function offlineDeclaration(ctx: Context): { declaration: Declaration; bytes: Buffer } {
  const [file, ...extra] = ctx.args.positionals;
  if (!file) throw new UsageError(`${ctx.args.command} needs a declaration FILE`);
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const parsed = readDeclarationFile(file, ctx.host);
  if (ctx.state.hasDeclared())
    throw new UsageError(
      `${ctx.args.command} FILE is for a machine the mesh has not spoken to; this node holds a declaration from the mesh (use \`mesh-host reconcile\`)`,
    );
  checkGiven(ctx, parsed.declaration);
  return parsed;
}

/** Plan, print the plan, then act (unless a dry run), under the lock; the report in words or as JSON. */
export async function applyOffline(
  ctx: Context,
  declaration: Declaration,
  bytes: Buffer,
  dryRun: boolean,
): Promise<number> {
  // genesis is the review of what an adopted machine holds (its held lines say "unchanged"): every step, always
  const verbose = ctx.args.verbose || ctx.args.command === "genesis";
  const hooks = applyHooks(ctx, dryRun, verbose);
  try {
    const machine = {
      host: ctx.host,
      state: ctx.state,
      originals: ctx.originals,
      ports: portsOf(ctx),
      unseal: ctx.unseal,
    };
    const result = await applyFile(
      machine,
      { declaration, bytes },
      { dryRun, ...hooks.options, record: (r) => recordGenesis(ctx, r, bytes, dryRun) },
    );
    hooks.done();
    if (result.exit === 2) throw new Refused(result.report.refusals);
    showResult(ctx, result, dryRun, verbose);
    // a dry run applied nothing, and its log says nothing of an apply
    if (!dryRun) logOutcome(ctx, result.report);
    return result.exit;
  } finally {
    hooks.done();
  }
}

/** The bundle genesis applied, by its digest, so `reconcile` can refuse any other bytes: under the apply's lock. */
function recordGenesis(ctx: Context, result: ApplyResult, bytes: Buffer, dryRun: boolean): void {
  if (ctx.args.command !== "genesis" || dryRun || result.report.outcome !== "applied") return;
  ctx.state.writeGenesis({
    digest: digestOf(bytes),
    mode: ctx.state.readNode()!.mode!,
    at: new Date().toISOString(),
  });
}

/**
 * What a command tells the apply it runs: the diff asked for, the signal Ctrl-C aborts, where the plan and the
 * progress line go; `done` takes the progress line away and the signal handlers off.
 */
export function applyHooks(ctx: Context, dryRun: boolean, verbose: boolean) {
  const shown = progress(!ctx.args.json, process.stderr);
  const stop = dryRun ? null : interruptible(ctx);
  return {
    options: {
      diff: ctx.args.diff,
      signal: stop?.signal,
      onPlan: ctx.args.json
        ? undefined
        : (plan: PlanLine[]) => {
            shown.clear();
            writeOut(planText(plan, verbose));
          },
      onStep: shown.step,
    },
    done() {
      shown.clear();
      stop?.done();
    },
  };
}

/** The plan (a dry run) or the plan and the report, in words or as one JSON document; how far an interrupted one got. */
export function showResult(ctx: Context, result: ApplyResult, dryRun: boolean, verbose: boolean): void {
  const cut = result.interrupted;
  if (ctx.args.json)
    writeJson(
      dryRun
        ? { plan: result.plan }
        : { plan: result.plan, report: result.report, ...(cut ? { interrupted: cut } : {}) },
    );
  else if (dryRun) writeOut(planText(result.plan, verbose, true));
  else
    writeOut(
      `${reportText(result.report, verbose)}${cut ? `\ninterrupted after ${cut.after} of ${cut.of} steps: the rest were not reached; apply again to finish` : ""}`,
    );
}

/**
 * Ctrl-C or SIGTERM during an apply: the step in progress finishes and the rest are not reached, so the report
 * says exactly what was done; a second signal finds no handler and ends the process at once.
 */
export function interruptible(ctx: Context): { signal: AbortSignal; done(): void } {
  const controller = new AbortController();
  const stop = (signal: NodeJS.Signals) => {
    controller.abort();
    ctx.log.warn({ signal }, "interrupted: stopping after the step in progress");
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return {
    signal: controller.signal,
    done: () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
    },
  };
}

/** The apply's end: info when it applied, error naming each failed step when it did not. */
export function logOutcome(ctx: Context, report: Report): void {
  const { outcome, declaration } = report;
  if (outcome === "applied")
    return void ctx.log.info({ outcome, digest: declaration.digest }, "apply finished");
  const failed = report.steps.filter((s) => s.did === "failed").map((s) => `${s.id}: ${s.detail}`);
  ctx.log.error({ outcome, digest: declaration.digest, failed }, "apply failed");
}

export async function applyCommand(ctx: Context, dryRun: boolean): Promise<number> {
  const { declaration, bytes } = offlineDeclaration(ctx);
  return applyOffline(ctx, declaration, bytes, dryRun);
}

/**
 * `genesis BUNDLE --mode M`: the machine's first declaration, carried by the installer. The mode is recorded
 * only when none is (a re-run never writes it back over what the mesh said since), and the bundle is marked
 * consumed by its digest so `reconcile` can refuse any other bytes.
 */
export async function genesisCommand(ctx: Context): Promise<number> {
  const mode = ctx.args.mode;
  if (!mode)
    throw new UsageError("genesis needs --mode adopted|converged: what the operator says this machine is");
  const { declaration, bytes } = offlineDeclaration(ctx);
  if (declaration.mode !== mode)
    throw new Refused([
      {
        id: "declaration",
        field: "mode",
        reason: `the bundle says ${declaration.mode}, but --mode says ${mode}`,
      },
    ]);
  const recorded = ctx.state.readNode()?.mode;
  if (recorded && recorded !== mode) throw new Refused([modeRefusal(mode, recorded)]);
  return applyOffline(ctx, declaration, bytes, ctx.args.dryRun);
}
