// mesh-host: every command, its exit status (0 done, 1 failed, 2 refused), one line on refusal.
// Each command's code is loaded when that command runs, never before: `version` loads no schema, no applier and
// no logger, an offline apply never loads the link (tls, the NATS client), and only the commands that dial load
// it. A new command is one line below, its module imported inside its handler (a static import here would put
// it, and all it imports, into every command's start-up).
import { type Args, parseCli, UsageError } from "./args.ts";
import type { Context } from "./context.ts";
import { writeOut } from "./output.ts";

const USAGE = `usage: mesh-host <command> [flags]
  apply FILE [--dry-run]   make this machine match the declaration in FILE (no mesh)
  plan FILE                the same as apply --dry-run
  genesis BUNDLE --mode M [--secret NAME=FILE]...
                           the machine's first declaration (adopted|converged), marked consumed;
                           a secret the bundle names "installer" is read from FILE, the value alone
  enrol CODE               make keys, ask the mesh, save the membership
  run                      hold the node in its mesh until stopped
  reconcile [BUNDLE] [--dry-run]  apply the mesh's last declaration (or the consumed bundle) again, now
  status                   identity, bus, last declaration, holds, mode
  overlay take --tunnel IF take a found WireGuard tunnel's key as the overlay key; the mesh told first
  install-service          write the unit and the launcher where no package did
  version                  version, commit, Node runtime, host kind
global flags: --state DIR  --root DIR  --host arch|android|linux  --json
  --verbose                apply, plan, reconcile: list unchanged steps too (--json always has them)`;

type Handler = (args: Args) => Promise<number>;

/** A command that works on this machine's state: the context (host, state, logger) is made for it, then it runs. */
const withContext =
  (run: (ctx: Context) => Promise<number> | number): Handler =>
  async (args) =>
    run((await import("./context.ts")).makeContext(args));

const HANDLERS: Partial<Record<Args["command"], Handler>> = {
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
  try {
    const args = parseCli(argv);
    if (args.command === "help") {
      writeOut(USAGE);
      return 0;
    }
    const handler = HANDLERS[args.command];
    if (!handler) throw new UsageError(`${args.command} is not available in this build yet`);
    return await handler(args);
  } catch (e) {
    return failure(e);
  }
}

/** Whether `e` is a refusal (exit 2): the classes are loaded only here, on the way out, not for every start. */
async function refused(e: unknown): Promise<boolean> {
  if (e instanceof UsageError) return true;
  const [{ StateError }, { Refused }] = await Promise.all([
    import("../store/index.ts"),
    import("./context.ts"),
  ]);
  return e instanceof Refused || e instanceof StateError;
}

/** Every refusal is one line naming what was wrong, never a stack trace. */
async function failure(e: unknown): Promise<number> {
  if (await refused(e)) {
    process.stderr.write(`mesh-host: ${(e as Error).message}\n`);
    return 2;
  }
  process.stderr.write(`mesh-host: ${(e as Error)?.message?.split("\n")[0] ?? String(e)}\n`);
  if (process.env.MESH_DEBUG) process.stderr.write(`${(e as Error)?.stack ?? ""}\n`);
  return 1;
}
