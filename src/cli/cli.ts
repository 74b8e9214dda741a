// mesh-host: every command, its exit status (0 done, 1 failed, 2 refused), one line on refusal.
//
// Each command's code is loaded when that command runs, never before: `version` loads no schema, no applier and
// no logger; an offline apply never loads the link (tls, the NATS client); only the commands that dial do. A new
// command is one line in `handlers`, its module imported inside its handler: a static import here would put it,
// and all it imports, into every command's start-up (test/build/build.test.ts checks the link stays out). What only
// some hosts carry (the Arch appliers, the overlay, the operator's commands) comes in `parts`, from the
// executable's composition root (main.ts, main-android.ts), so an executable without it never bundles it.
import { faultLine } from "../faults.ts";
import { type Args, type Command, parseCli, UsageError } from "./args.ts";
import type { Context } from "./context.ts";
import { commandHelp, overview } from "./help.ts";
import { writeOut } from "./output.ts";
import type { HostParts } from "./parts.ts";
import { commandSpec } from "./table.ts";

/** Runs the command; `made` is told the context once there is one (its state directory names faults). */
type Handler = (args: Args, made: (ctx: Context) => void) => Promise<number>;

/** Every command of the table has its handler: a command added there and not here fails the typecheck. */
function handlers(parts: HostParts): Record<Exclude<Command, "help">, Handler> {
  /** A command that works on this machine's state: the context (host, state, logger) is made for it first. */
  const withContext =
    (run: (ctx: Context) => Promise<number> | number): Handler =>
    async (args, made) => {
      const ctx = await (await import("./context.ts")).makeContext(args, parts);
      made(ctx);
      return run(ctx);
    };
  /** A command only some executables carry: this one's root handed it in, or it refuses in one line. */
  const carried = (name: keyof HostParts["commands"]): Handler =>
    withContext((ctx) => {
      const command = parts.commands[name];
      if (!command) throw new UsageError(`${ctx.host.support.reason}: ${name} is not in this executable`);
      return command(ctx);
    });
  return {
    apply: withContext(async (ctx) =>
      (await import("./commands/apply.ts")).applyCommand(ctx, ctx.args.dryRun),
    ),
    plan: withContext(async (ctx) => (await import("./commands/apply.ts")).applyCommand(ctx, true)),
    genesis: withContext(async (ctx) => (await import("./commands/apply.ts")).genesisCommand(ctx)),
    enrol: withContext(async (ctx) => (await import("./commands/enrol.ts")).enrolCommand(ctx)),
    reconcile: withContext(async (ctx) => (await import("./commands/reconcile.ts")).reconcileCommand(ctx)),
    run: withContext(async (ctx) => (await import("./commands/run.ts")).runCommand(ctx)),
    overlay: carried("overlay"),
    "install-service": carried("install-service"),
    status: withContext(async (ctx) => (await import("./commands/info.ts")).statusCommand(ctx)),
    version: async (args) => (await import("./commands/version.ts")).versionCommand(args),
  };
}

/** The operator's commands (src/cli/mesh/), with their own flags and help, where this executable carries them. */
function mesh(parts: HostParts, argv: string[]): Promise<number> {
  if (!parts.mesh)
    throw new UsageError(
      "the operator's commands (mesh …) are not in this executable, which runs a node only",
    );
  return parts.mesh(argv);
}

export async function main(argv: string[], parts: HostParts): Promise<number> {
  let stateDir: string | undefined;
  try {
    if (argv[0] === "mesh") return await mesh(parts, argv.slice(1));
    if (argv[0] === "help" && argv[1] === "mesh") return await mesh(parts, ["help", ...argv.slice(2)]);
    const args = parseCli(argv);
    if (args.command === "help") {
      writeOut(args.helpFor ? commandHelp(commandSpec(args.helpFor)!) : overview());
      return 0;
    }
    return await handlers(parts)[args.command as Exclude<Command, "help">](args, (ctx) => {
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
