// The command line, read against the one table (table.ts): a flag the command does not take, a value missing
// or not one of its choices, is refused in our words, naming the command's help.
import {
  DEFAULT_ROOT,
  DEFAULT_STATE_DIR,
  DRIFT_S,
  HEARTBEAT_S,
  MOVE_GRACE_S,
  REDIAL_SPREAD_S,
} from "../defaults.ts";
import type { HostKind } from "../host-kind.ts";
import { printable } from "../printable.ts";
import { COMMANDS, type Command, commandSpec, FLAGS, type Flag, type FlagName, flagsOf } from "./table.ts";

export type { Command } from "./table.ts";

/** Bad input: one line, exit 2, nothing changed. */
export class UsageError extends Error {}

export interface Args {
  command: Command;
  /** `help CMD`: the command whose help is asked for. */
  helpFor?: Command;
  positionals: string[];
  state: string;
  stateGiven: boolean;
  root: string;
  host?: HostKind;
  json: boolean;
  /** Given by --log-format; absent: text on a terminal, json otherwise. */
  logFormat?: "json" | "text";
  dryRun: boolean;
  diff: boolean;
  /** Every step in the words of a plan or report, unchanged ones too (--json always has them all). */
  verbose: boolean;
  server: string[];
  fingerprint?: string;
  node?: string;
  token?: string;
  /** `enrol --code-file F`: the enrolment code read from F, never from argv. */
  codeFile?: string;
  /** `enrol --replace`: enrol an enrolled node again, with new keys, keeping its records and holds. */
  replace: boolean;
  /** `overlay take --tunnel <if>`: the found WireGuard interface whose key becomes the overlay key. */
  tunnel?: string;
  mode?: "adopted" | "converged";
  /** `--secret NAME=FILE`: a secret the installer gives a bundle that names it as `"installer"`. */
  secret: string[];
  heartbeatS: number;
  redialSpreadS: number;
  driftS: number;
  moveGraceS: number;
}

type Values = Partial<Record<FlagName, string | string[] | true>>;

const byShort = new Map(Object.values(FLAGS).flatMap((f: Flag) => (f.short ? [[f.short, f]] : [])));

/** A flag as given: the table's entry, its value (true for a switch), and how it was spelt. */
export type Given = [Flag, string | true, string];

/**
 * argv as flags and positionals; `--` ends the flags, `-` alone is a positional (standard input). Every flag of
 * the table is known here, the host's and the operator's: which command takes which is checked after.
 * `hint` ends a refusal with where to read more, given the first positional.
 */
export function tokens(
  argv: string[],
  hint: (first: string | undefined) => string = helpHint,
  /** The flags by name, when a group spells one otherwise (`mesh release add --version V`). */
  byName: Record<string, Flag> = FLAGS,
): { given: Given[]; positionals: string[] } {
  const given: Given[] = [];
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (a === "-" || !a.startsWith("-")) {
      positionals.push(a);
      continue;
    }
    const eq = a.startsWith("--") ? a.indexOf("=") : -1;
    const spelt = eq > 0 ? a.slice(0, eq) : a;
    const f = a.startsWith("--")
      ? byName[spelt.slice(2)]
      : spelt.length === 2
        ? byName[byShort.get(spelt.slice(1))?.name ?? ""]
        : undefined;
    if (!f) throw new UsageError(`unknown flag ${printable(spelt, 60)}${hint(positionals[0])}`);
    if (!f.value) {
      if (eq > 0) throw new UsageError(`--${f.name} takes no value${hint(positionals[0])}`);
      given.push([f, true, spelt]);
      continue;
    }
    const value = eq > 0 ? a.slice(eq + 1) : argv[i + 1];
    if (value === undefined || (eq < 0 && value.startsWith("--")))
      throw new UsageError(`--${f.name} needs a value (${f.value})${hint(positionals[0])}`);
    if (eq < 0) i++;
    given.push([f, value, spelt]);
  }
  return { given, positionals };
}

/** "; see `mesh-host help apply`" for a known command, the overview otherwise. */
function helpHint(command: string | undefined): string {
  return command && commandSpec(command) ? ` (see \`mesh-host help ${command}\`)` : " (see `mesh-host help`)";
}

export function parseCli(argv: string[]): Args {
  const { given, positionals } = tokens(argv);
  const [first, ...rest] = positionals;
  const values: Values = {};
  for (const [f, v] of given) {
    const name = f.name as FlagName;
    // a flag given twice takes its last value, as getopt does: a wrapper may append to the service's flags
    if (f.multiple) values[name] = [...((values[name] as string[] | undefined) ?? []), v as string];
    else values[name] = v;
  }
  if (values.version) return { ...argsOf(values), command: "version", positionals: [] };
  if (first !== undefined && !commandSpec(first))
    throw new UsageError(
      `unknown command "${printable(first, 60)}" (commands: ${COMMANDS.map((c) => c.name).join(", ")}; see \`mesh-host help\`)`,
    );
  const command = (first ?? "help") as Command;
  if (values.help || command === "help") return helpArgs(command === "help" ? rest[0] : command);
  const spec = commandSpec(command)!;
  const allowed = new Set(flagsOf(spec).map((f) => f.name));
  for (const [f, v, spelt] of given) {
    if (!allowed.has(f.name)) {
      const takers = COMMANDS.filter((c) => (c.flags as readonly string[]).includes(f.name)).map(
        (c) => c.name,
      );
      throw new UsageError(
        `${command} takes no ${spelt}${takers.length ? ` (it is a flag of ${takers.join(", ")})` : ""}${helpHint(command)}`,
      );
    }
    if (f.choices && typeof v === "string" && !f.choices.includes(v))
      throw new UsageError(
        `--${f.name} must be ${f.choices.join(" or ")}, not "${printable(v, 60)}"${helpHint(command)}`,
      );
  }
  return { ...argsOf(values), command, positionals: rest };
}

function helpArgs(topic: string | undefined): Args {
  if (topic !== undefined && !commandSpec(topic))
    throw new UsageError(
      `no help for "${printable(topic, 60)}": it is not a command (commands: ${COMMANDS.map((c) => c.name).join(", ")})`,
    );
  return { ...argsOf({}), command: "help", helpFor: topic as Command | undefined, positionals: [] };
}

function seconds(name: FlagName, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 86_400)
    throw new UsageError(
      `--${name} must be a number of seconds between 0 and 86400, not "${printable(value, 60)}"`,
    );
  return n;
}

function argsOf(v: Values): Omit<Args, "command" | "positionals"> {
  const one = (name: FlagName) => v[name] as string | undefined;
  const many = (name: FlagName) => (v[name] as string[] | undefined) ?? [];
  return {
    state: one("state") ?? process.env.MESH_HOST_STATE ?? DEFAULT_STATE_DIR,
    stateGiven: v.state !== undefined || process.env.MESH_HOST_STATE !== undefined,
    root: one("root") ?? DEFAULT_ROOT,
    host: one("host") as HostKind | undefined,
    json: v.json === true,
    logFormat: one("log-format") as Args["logFormat"],
    dryRun: v["dry-run"] === true,
    diff: v.diff === true,
    verbose: v.verbose === true,
    server: many("server"),
    fingerprint: one("fingerprint"),
    node: one("node"),
    token: one("token"),
    codeFile: one("code-file"),
    replace: v.replace === true,
    tunnel: one("tunnel"),
    mode: one("mode") as Args["mode"],
    secret: many("secret"),
    heartbeatS: seconds("heartbeat-s", one("heartbeat-s"), HEARTBEAT_S),
    driftS: seconds("drift-s", one("drift-s"), DRIFT_S),
    moveGraceS: seconds("move-grace-s", one("move-grace-s"), MOVE_GRACE_S),
    redialSpreadS: seconds("redial-spread-s", one("redial-spread-s"), REDIAL_SPREAD_S),
  };
}
