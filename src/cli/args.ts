// Flags of cli.md: global ones for every command, and each command's own; anything else is refused.
import { parseArgs } from "node:util";
import { DEFAULT_ROOT, DEFAULT_STATE_DIR, DRIFT_S, HEARTBEAT_S, MOVE_GRACE_S } from "../defaults.ts";
import { HOST_KINDS, type HostKind } from "../hosts/index.ts";

/** Bad input: one line, exit 2, nothing changed. */
export class UsageError extends Error {}

export const COMMANDS = [
  "apply",
  "plan",
  "genesis",
  "enrol",
  "run",
  "reconcile",
  "status",
  "install-service",
  "version",
  "overlay",
  "help",
] as const;
export type Command = (typeof COMMANDS)[number];
/** The commands that may apply a bundle, and so may be given its installer secrets. */
const SECRET_TAKERS: readonly string[] = ["genesis", "apply", "plan", "reconcile"];

const OPTIONS = {
  state: { type: "string" },
  root: { type: "string" },
  host: { type: "string" },
  json: { type: "boolean", default: false },
  "dry-run": { type: "boolean", default: false },
  server: { type: "string", multiple: true },
  fingerprint: { type: "string" },
  node: { type: "string" },
  token: { type: "string" },
  "code-file": { type: "string" },
  tunnel: { type: "string" },
  mode: { type: "string" },
  secret: { type: "string", multiple: true },
  "heartbeat-s": { type: "string" },
  "drift-s": { type: "string" },
  "move-grace-s": { type: "string" },
  help: { type: "boolean", short: "h", default: false },
} as const;

export interface Args {
  command: Command;
  positionals: string[];
  state: string;
  stateGiven: boolean;
  root: string;
  host?: HostKind;
  json: boolean;
  dryRun: boolean;
  server: string[];
  fingerprint?: string;
  node?: string;
  token?: string;
  /** `enrol --code-file F`: the enrolment code read from F, never from argv. */
  codeFile?: string;
  /** `overlay take --tunnel <if>`: the found WireGuard interface whose key becomes the overlay key. */
  tunnel?: string;
  mode?: "adopted" | "converged";
  /** `--secret NAME=FILE`: a secret the installer gives a bundle that names it as `"installer"`. */
  secret: string[];
  heartbeatS: number;
  driftS: number;
  moveGraceS: number;
}

function seconds(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 86_400)
    throw new UsageError(`--${flag} must be a number of seconds between 0 and 86400, not "${value}"`);
  return n;
}

export function parseCli(argv: string[]): Args {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message.split("\n")[0]!.replace(/^TypeError \[[A-Z_]+\]: /, ""));
  }
  const { values, positionals } = parsed;
  const [command = "help", ...rest] = positionals;
  if (values.help) return { ...defaults(values), command: "help", positionals: [] };
  if (!(COMMANDS as readonly string[]).includes(command))
    throw new UsageError(`unknown command "${command}" (commands: ${COMMANDS.join(", ")})`);
  if (values.mode !== undefined && values.mode !== "adopted" && values.mode !== "converged")
    throw new UsageError(`--mode must be adopted or converged, not "${values.mode}"`);
  if (values.secret?.length && !SECRET_TAKERS.includes(command))
    throw new UsageError(`--secret is for ${SECRET_TAKERS.join(", ")}: the commands that apply a bundle`);
  if (values.host !== undefined && !(HOST_KINDS as readonly string[]).includes(values.host))
    throw new UsageError(`--host must be one of ${HOST_KINDS.join(", ")}, not "${values.host}"`);
  return { ...defaults(values), command: command as Command, positionals: rest };
}

function defaults(values: Record<string, unknown>): Omit<Args, "command" | "positionals"> {
  const v = values as { [K in keyof typeof OPTIONS]?: never } & Record<
    string,
    string | string[] | boolean | undefined
  >;
  return {
    state: (v.state as string | undefined) ?? process.env.MESH_HOST_STATE ?? DEFAULT_STATE_DIR,
    stateGiven: v.state !== undefined || process.env.MESH_HOST_STATE !== undefined,
    root: (v.root as string | undefined) ?? DEFAULT_ROOT,
    host: v.host as HostKind | undefined,
    json: Boolean(v.json),
    dryRun: Boolean(v["dry-run"]),
    server: (v.server as string[] | undefined) ?? [],
    fingerprint: v.fingerprint as string | undefined,
    node: v.node as string | undefined,
    token: v.token as string | undefined,
    codeFile: v["code-file"] as string | undefined,
    tunnel: v.tunnel as string | undefined,
    mode: v.mode as Args["mode"],
    secret: (v.secret as string[] | undefined) ?? [],
    heartbeatS: seconds("heartbeat-s", v["heartbeat-s"] as string | undefined, HEARTBEAT_S),
    driftS: seconds("drift-s", v["drift-s"] as string | undefined, DRIFT_S),
    moveGraceS: seconds("move-grace-s", v["move-grace-s"] as string | undefined, MOVE_GRACE_S),
  };
}
