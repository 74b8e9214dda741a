// `mesh-host mesh …` flags, read by the host's own parser against the one table (src/cli/table.ts: FLAGS and
// MESH_COMMANDS): each subcommand takes its own, anything else is refused in our words. The usage `mesh --help`
// prints, the man page and the completions are made from the same table.
import { DEFAULT_MESH_DIR, PUSH_WAIT_S } from "../../defaults.ts";
import { type Given, printable, tokens, UsageError } from "../args.ts";
import {
  type CommandSpec,
  FLAGS,
  type Flag,
  flagsOf,
  flagUsage,
  MESH_COMMANDS,
  meshCommandSpec,
  REQUIRED,
} from "../table.ts";

const SEE = " (see `mesh-host mesh --help`)";

/** One line of the usage: the command, its words and flags, then what it does (on the next line when long). */
function usageOf(spec: CommandSpec): string {
  const own = flagsOf(spec).filter((f) => (spec.flags as readonly string[]).includes(f.name));
  const word = (f: Flag) => (f.default === REQUIRED ? ` ${flagUsage(f)}` : ` [${flagUsage(f)}]`);
  const flags = own.map((f: Flag) => `${word(f)}${f.multiple ? "..." : ""}`).join("");
  const left = `  ${spec.name}${spec.args ? ` ${spec.args}` : ""}${flags}`;
  return left.length < 48 ? `${left.padEnd(48)}${spec.summary}` : `${left}\n${" ".repeat(48)}${spec.summary}`;
}

export const MESH_USAGE = [
  "usage: mesh-host mesh <command> [--mesh DIR] [flags]",
  ...MESH_COMMANDS.map(usageOf),
  `--mesh DIR defaults to ${FLAGS.mesh.default}`,
  "`mesh-host mesh COMMAND --help` gives a command's own flags, defaults and exit statuses.",
].join("\n");

/** `mesh-host mesh node --help`: the two commands under `node`. */
export const MESH_NODE_USAGE = [
  "usage: mesh-host mesh node add|rm NAME [flags]",
  ...MESH_COMMANDS.filter((c) => c.name.startsWith("node ")).map(usageOf),
  "`mesh-host mesh node add --help` (or rm) gives its own flags, defaults and exit statuses.",
].join("\n");

export interface MeshArgs {
  command: string;
  positionals: string[];
  dir: string;
  json: boolean;
  server: string[];
  servers: number | null;
  only: number | null;
  unit: boolean;
  unitDir: string;
  codeFile: string | null;
  /** `--expires`, in seconds; null: the default. */
  expiresS: number | null;
  all: boolean;
  secret: string[];
  waitS: number;
  to: string | null;
  help: boolean;
}

function count(flag: string, value: string | undefined, min: number): number | null {
  if (value === undefined) return null;
  if (!/^\d{1,6}$/.test(value) || Number(value) < min || Number(value) > 86_400)
    throw new UsageError(`--${flag} must be a whole number from ${min}, not "${printable(value)}"`);
  return Number(value);
}

const SECONDS_PER_UNIT: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `30m`, `12h`, `7d`: seconds; refused in one line naming the flag otherwise. */
function durationS(flag: string, value: string | undefined): number | null {
  if (value === undefined) return null;
  const m = /^(\d{1,6})([smhd])$/.exec(value);
  if (!m)
    throw new UsageError(
      `--${flag} must be a number and a unit (s, m, h or d), like 24h, not "${printable(value)}"`,
    );
  return Number(m[1]) * SECONDS_PER_UNIT[m[2]!]!;
}

export function parseMesh(argv: string[]): MeshArgs {
  const { given, positionals: words } = tokens(argv, () => SEE);
  const v: Record<string, string | string[] | true> = {};
  for (const [f, value] of given)
    v[f.name] = f.multiple ? [...((v[f.name] as string[] | undefined) ?? []), value as string] : value;
  const help = v.help === true;
  const [command, positionals] = commandOf(words, help);
  if (command !== "help" && command !== "node") checkFlags(command, given);
  const one = (name: string) => v[name] as string | undefined;
  return {
    command,
    positionals,
    dir: one("mesh") ?? process.env.MESH_DIR ?? DEFAULT_MESH_DIR,
    json: v.json === true,
    server: (v.server as string[] | undefined) ?? [],
    servers: count("servers", one("servers"), 1),
    only: count("only", one("only"), 1),
    unit: v.unit === true,
    unitDir: one("unit-dir") ?? FLAGS["unit-dir"].default,
    codeFile: one("code-file") ?? null,
    expiresS: durationS("expires", one("expires")),
    all: v.all === true,
    secret: (v.secret as string[] | undefined) ?? [],
    waitS: count("wait-s", one("wait-s"), 0) ?? PUSH_WAIT_S,
    to: one("to") ?? null,
    help: help || command === "help",
  };
}

/** The subcommand (`node add` is two words) and the words after it; none is `help` (`node` alone, for help). */
function commandOf(words: string[], help: boolean): [string, string[]] {
  let [command = "help", ...positionals] = words;
  if (command === "node") {
    if (help && positionals.length === 0) return ["node", []];
    const sub = positionals.shift();
    if (sub !== "add" && sub !== "rm")
      throw new UsageError(`mesh node takes add or rm, not ${sub ? `"${printable(sub)}"` : "nothing"}`);
    command = `node ${sub}`;
  }
  if (command !== "help" && !meshCommandSpec(command))
    throw new UsageError(
      `unknown mesh command "${printable(command)}" (${MESH_COMMANDS.map((c) => c.name).join(", ")})`,
    );
  return [command, positionals];
}

/** Every flag given is one `command` takes (`--mesh` and `--help` go with all). */
function checkFlags(command: string, given: Given[]): void {
  const takes = new Set(flagsOf(meshCommandSpec(command)!).map((f) => f.name));
  for (const [f] of given)
    if (!takes.has(f.name)) throw new UsageError(`mesh ${command} does not take --${f.name}`);
}
