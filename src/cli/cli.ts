// mesh-host: every command, its exit status (0 done, 1 failed, 2 refused), one line on refusal.
import { StateError } from "../store/index.ts";
import { type Args, parseCli, UsageError } from "./args.ts";
import { applyCommand, genesisCommand } from "./commands/apply.ts";
import { statusCommand, versionCommand } from "./commands/info.ts";
import { reconcileCommand } from "./commands/reconcile.ts";
import { type Context, makeContext, Refused } from "./context.ts";
import { writeOut } from "./output.ts";

const USAGE = `usage: mesh-host <command> [flags]
  apply FILE [--dry-run]   make this machine match the declaration in FILE (no mesh)
  plan FILE                the same as apply --dry-run
  genesis BUNDLE --mode M [--secret NAME=FILE]...
                           the machine's first declaration (adopted|converged), marked consumed;
                           a secret the bundle names "installer" is read from FILE, the value alone
  enrol [--code-file F]    make keys, ask the mesh, save the membership (the code on standard input)
  run                      hold the node in its mesh until stopped
  reconcile [BUNDLE] [--dry-run]  apply the mesh's last declaration (or the consumed bundle) again, now
  status                   identity, bus, last declaration, holds, mode
  overlay take --tunnel IF take a found WireGuard tunnel's key as the overlay key; the mesh told first
  install-service          write the unit and the launcher where no package did
  version                  version, commit, Node runtime, host kind
global flags: --state DIR  --root DIR  --host arch|android|linux  --json`;

type Handler = (ctx: Context) => Promise<number> | number;

const HANDLERS: Partial<Record<Args["command"], Handler>> = {
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
  try {
    const args = parseCli(argv);
    if (args.command === "help") {
      writeOut(USAGE);
      return 0;
    }
    const handler = HANDLERS[args.command];
    if (!handler) throw new UsageError(`${args.command} is not available in this build yet`);
    return await handler(makeContext(args));
  } catch (e) {
    return failure(e);
  }
}

/** Every refusal is one line naming what was wrong, never a stack trace. */
function failure(e: unknown): number {
  if (e instanceof UsageError || e instanceof Refused || e instanceof StateError) {
    process.stderr.write(`mesh-host: ${e.message}\n`);
    return 2;
  }
  process.stderr.write(`mesh-host: ${(e as Error)?.message?.split("\n")[0] ?? String(e)}\n`);
  if (process.env.MESH_DEBUG) process.stderr.write(`${(e as Error)?.stack ?? ""}\n`);
  return 1;
}
