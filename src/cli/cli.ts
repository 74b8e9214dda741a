// mesh-host: every command, its exit status (0 done, 1 failed, 2 refused), one line on refusal.
import { faultLine, StateError, stateFault } from "../store/index.ts";
import { type Command, parseCli, UsageError } from "./args.ts";
import { applyCommand, genesisCommand } from "./commands/apply.ts";
import { statusCommand, versionCommand } from "./commands/info.ts";
import { reconcileCommand } from "./commands/reconcile.ts";
import { type Context, makeContext, Refused } from "./context.ts";
import { commandHelp, overview } from "./help.ts";
import { writeOut } from "./output.ts";
import { commandSpec } from "./table.ts";

type Handler = (ctx: Context) => Promise<number> | number;

/** Every command of the table has its handler: a command added there and not here fails the typecheck. */
const HANDLERS: Record<Exclude<Command, "help">, Handler> = {
  apply: (ctx) => applyCommand(ctx, ctx.args.dryRun),
  plan: (ctx) => applyCommand(ctx, true),
  genesis: genesisCommand,
  // the bus client is loaded only by the commands that dial: `version` and `apply` start without it
  enrol: async (ctx) => (await import("./commands/enrol.ts")).enrolCommand(ctx),
  reconcile: reconcileCommand,
  run: async (ctx) => (await import("./commands/run.ts")).runCommand(ctx),
  overlay: async (ctx) => (await import("./commands/overlay.ts")).overlayCommand(ctx),
  "install-service": async (ctx) => (await import("./commands/install.ts")).installServiceCommand(ctx),
  status: statusCommand,
  version: versionCommand,
};

export async function main(argv: string[]): Promise<number> {
  let stateDir: string | undefined;
  try {
    const args = parseCli(argv);
    if (args.command === "help") {
      writeOut(args.helpFor ? commandHelp(commandSpec(args.helpFor)!) : overview());
      return 0;
    }
    const ctx = makeContext(args);
    stateDir = ctx.state.dir;
    return await HANDLERS[args.command as keyof typeof HANDLERS](ctx);
  } catch (e) {
    return failure(e, stateDir);
  }
}

/** A fault on a path of the state directory is the state's: refused with what to do, like one State met. */
function onState(e: unknown, stateDir: string | undefined): boolean {
  const path = (e as NodeJS.ErrnoException)?.path;
  return !!stateDir && typeof path === "string" && (path === stateDir || path.startsWith(`${stateDir}/`));
}

/** Every refusal is one line naming what was wrong, in our words, never a stack trace. */
function failure(e: unknown, stateDir?: string): number {
  const fault = onState(e, stateDir) ? stateFault(e) : e;
  if (fault instanceof UsageError || fault instanceof Refused || fault instanceof StateError) {
    process.stderr.write(`mesh-host: ${fault.message}\n`);
    return 2;
  }
  const line = faultLine(e) ?? (e as Error)?.message?.split("\n")[0] ?? String(e);
  process.stderr.write(`mesh-host: ${line}\n`);
  if (process.env.MESH_DEBUG) process.stderr.write(`${(e as Error)?.stack ?? ""}\n`);
  return 1;
}
