// mesh-host: every command, its exit status (0 done, 1 failed, 2 refused), one line on refusal.
//
// Each command's code is loaded when that command runs, never before: `version` loads no schema, no applier and
// no logger; an offline apply never loads the link (tls, the NATS client); only the commands that dial do. A new
// command is one line in HANDLERS, its module imported inside its handler: a static import here would put it,
// and all it imports, into every command's start-up (test/build/build.test.ts checks the link stays out).
import { faultLine } from "../store/faults.ts";
import { type Args, type Command, parseCli, UsageError } from "./args.ts";
import type { Context } from "./context.ts";
import { commandHelp, overview } from "./help.ts";
import { writeOut } from "./output.ts";
import { commandSpec } from "./table.ts";

/** Runs the command; `made` is told the context once there is one (its state directory names faults). */
type Handler = (args: Args, made: (ctx: Context) => void) => Promise<number>;

/** A command that works on this machine's state: the context (host, state, logger) is made for it first. */
const withContext =
  (run: (ctx: Context) => Promise<number> | number): Handler =>
  async (args, made) => {
    const ctx = (await import("./context.ts")).makeContext(args);
    made(ctx);
    return run(ctx);
  };

/** Every command of the table has its handler: a command added there and not here fails the typecheck. */
const HANDLERS: Record<Exclude<Command, "help">, Handler> = {
  apply: withContext(async (ctx) => (await import("./commands/apply.ts")).applyCommand(ctx, ctx.args.dryRun)),
  plan: withContext(async (ctx) => (await import("./commands/apply.ts")).applyCommand(ctx, true)),
  genesis: withContext(async (ctx) => (await import("./commands/apply.ts")).genesisCommand(ctx)),
  enrol: withContext(async (ctx) => (await import("./commands/enrol.ts")).enrolCommand(ctx)),
  reconcile: withContext(async (ctx) => (await import("./commands/reconcile.ts")).reconcileCommand(ctx)),
  run: withContext(async (ctx) => (await import("./commands/run.ts")).runCommand(ctx)),
  overlay: withContext(async (ctx) => (await import("./commands/overlay.ts")).overlayCommand(ctx)),
  "install-service": withContext(async (ctx) =>
    (await import("./commands/install.ts")).installServiceCommand(ctx),
  ),
  status: withContext(async (ctx) => (await import("./commands/info.ts")).statusCommand(ctx)),
  version: async (args) => (await import("./commands/version.ts")).versionCommand(args),
};

export async function main(argv: string[]): Promise<number> {
  let stateDir: string | undefined;
  try {
    // the operator's commands (src/cli/mesh/) have their own flags and help, and are not in the Android build
    if (argv[0] === "mesh") return await (await import("./mesh/main.ts")).meshMain(argv.slice(1));
    if (argv[0] === "help" && argv[1] === "mesh")
      return await (await import("./mesh/main.ts")).meshMain(["help", ...argv.slice(2)]);
    const args = parseCli(argv);
    if (args.command === "help") {
      writeOut(args.helpFor ? commandHelp(commandSpec(args.helpFor)!) : overview());
      return 0;
    }
    return await HANDLERS[args.command as keyof typeof HANDLERS](args, (ctx) => {
      stateDir = ctx.state.dir;
    });
  } catch (e) {
    return failure(e, stateDir);
  }
}

/** A fault on a path of the state directory is the state's: refused with what to do, like one State met. */
function onState(e: unknown, stateDir: string | undefined): boolean {
  const path = (e as NodeJS.ErrnoException)?.path;
  return !!stateDir && typeof path === "string" && (path === stateDir || path.startsWith(`${stateDir}/`));
}

/** Whether `e` is a refusal (exit 2): the classes are loaded here, on the way out, not for every start. */
async function refused(e: unknown): Promise<boolean> {
  if (e instanceof UsageError) return true;
  const [{ StateError }, { Refused }] = await Promise.all([
    import("../store/index.ts"),
    import("./context.ts"),
  ]);
  return e instanceof Refused || e instanceof StateError;
}

/** Every refusal is one line naming what was wrong, in our words, never a stack trace. */
async function failure(e: unknown, stateDir?: string): Promise<number> {
  const fault = onState(e, stateDir) ? (await import("../store/index.ts")).stateFault(e) : e;
  if (await refused(fault)) {
    process.stderr.write(`mesh-host: ${(fault as Error).message}\n`);
    return 2;
  }
  const line = faultLine(e) ?? (e as Error)?.message?.split("\n")[0] ?? String(e);
  process.stderr.write(`mesh-host: ${line}\n`);
  if (process.env.MESH_DEBUG) process.stderr.write(`${(e as Error)?.stack ?? ""}\n`);
  return 1;
}
