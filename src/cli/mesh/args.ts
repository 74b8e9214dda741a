// `mesh-host mesh …` flags, read by the host's own parser against the one table (src/cli/table.ts: FLAGS and
// MESH_COMMANDS): each subcommand takes its own, anything else is refused in our words. The usage `mesh --help`
// prints, the man page and the completions are made from the same table.
import {
  CODE_EXPIRES_MAX_S,
  CODE_EXPIRES_S,
  DEFAULT_MESH_DIR,
  PLAN_WAIT_S,
  PUSH_WAIT_S,
  ROLLOUT_GATE_S,
  ROLLOUT_WAVES,
} from "../../defaults.ts";
import { printable } from "../../printable.ts";
import { type Given, tokens, UsageError } from "../args.ts";
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

/** `mesh-host mesh release --help`: the three commands under `release`. */
export const MESH_RELEASE_USAGE = [
  "usage: mesh-host mesh release add|ls|rm [flags]",
  ...MESH_COMMANDS.filter((c) => c.name.startsWith("release ")).map(usageOf),
  "`mesh-host mesh release add --help` (or ls, rm) gives its own flags, defaults and exit statuses.",
].join("\n");

/** `mesh-host mesh node --help`: the commands under `node`. */
export const MESH_NODE_USAGE = [
  "usage: mesh-host mesh node add|rm|reissue|label NAME [flags]",
  ...MESH_COMMANDS.filter((c) => c.name.startsWith("node ")).map(usageOf),
  "`mesh-host mesh node add --help` (or rm, reissue, label) gives its own flags, defaults and exit statuses.",
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
  all: boolean;
  diff: boolean;
  where: string | null;
  serial: number | null;
  label: string[];
  allowRemovals: boolean;
  canary: number;
  waves: string;
  gateS: number;
  maxFailed: number;
  onHalt: "revert" | "stop";
  verbose: boolean;
  secret: string[];
  waitS: number;
  to: string | null;
  expiresS: number;
  /** `release add --version V` and `--host KIND`. */
  version: string | null;
  host: string | null;
  help: boolean;
}

/** The mesh's flags by name: `--version` takes a value here (a release's), the host's is a switch. */
const MESH_FLAGS: Record<string, Flag> = {
  ...FLAGS,
  version: { ...FLAGS.version, short: undefined, value: "V" },
};

/** The words of a two-word command (`node add`, `release ls`), and the second words each takes. */
const GROUPS: Record<string, readonly string[]> = {
  node: ["add", "rm", "reissue", "label"],
  release: ["add", "ls", "rm"],
};

const ROLLOUT_SUBS = ["status", "resume", "abort"];

function onHaltOf(value: string | undefined): "revert" | "stop" {
  if (value === undefined) return "revert";
  if (value !== "revert" && value !== "stop")
    throw new UsageError(`--on-halt must be revert or stop, not "${printable(value)}"`);
  return value;
}

const SECONDS_IN: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `--expires 30m`: seconds, from 1 s to CODE_EXPIRES_MAX_S. */
function duration(value: string | undefined): number {
  if (value === undefined) return CODE_EXPIRES_S;
  const m = /^(\d{1,7})([smhd])$/.exec(value);
  const s = m ? Number(m[1]) * SECONDS_IN[m[2]!]! : 0;
  if (!m || s < 1 || s > CODE_EXPIRES_MAX_S)
    throw new UsageError(
      `--expires must be a number and s, m, h or d, from 1s to ${CODE_EXPIRES_MAX_S / 86_400}d, not "${printable(value)}"`,
    );
  return s;
}

function count(flag: string, value: string | undefined, min: number): number | null {
  if (value === undefined) return null;
  if (!/^\d{1,6}$/.test(value) || Number(value) < min || Number(value) > 86_400)
    throw new UsageError(`--${flag} must be a whole number from ${min}, not "${printable(value)}"`);
  return Number(value);
}

export function parseMesh(argv: string[]): MeshArgs {
  const { given, positionals: words } = tokens(argv, () => SEE, MESH_FLAGS);
  const v: Record<string, string | string[] | true> = {};
  for (const [f, value] of given)
    v[f.name] = f.multiple ? [...((v[f.name] as string[] | undefined) ?? []), value as string] : value;
  const help = v.help === true;
  const [command, positionals] = commandOf(words, help);
  if (command !== "help" && !(command in GROUPS)) checkFlags(command, given);
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
    all: v.all === true,
    diff: v.diff === true,
    where: one("where") ?? null,
    serial: count("serial", one("serial"), 1),
    label: (v.label as string[] | undefined) ?? [],
    allowRemovals: v["allow-removals"] === true,
    canary: count("canary", one("canary"), 0) ?? 0,
    waves: one("waves") ?? ROLLOUT_WAVES,
    gateS: count("gate-s", one("gate-s"), 1) ?? ROLLOUT_GATE_S,
    maxFailed: count("max-failed", one("max-failed"), 0) ?? 0,
    onHalt: onHaltOf(one("on-halt")),
    verbose: v.verbose === true,
    secret: (v.secret as string[] | undefined) ?? [],
    waitS: count("wait-s", one("wait-s"), 0) ?? (command === "plan" ? PLAN_WAIT_S : PUSH_WAIT_S),
    to: one("to") ?? null,
    expiresS: duration(one("expires")),
    version: one("version") ?? null,
    host: one("host") ?? null,
    help: help || command === "help",
  };
}

/** The subcommand (`node add` is two words) and the words after it; none is `help` (`node` alone, for help). */
function commandOf(words: string[], help: boolean): [string, string[]] {
  let [command = "help", ...positionals] = words;
  // `rollout TARGETS FILE` is a command of its own; `rollout status|resume|abort ID` are its three
  if (command === "rollout" && ROLLOUT_SUBS.includes(positionals[0] ?? ""))
    return [`rollout ${positionals[0]}`, positionals.slice(1)];
  const subs = GROUPS[command];
  if (subs) {
    if (help && positionals.length === 0) return [command, []];
    const sub = positionals.shift();
    if (!sub || !subs.includes(sub))
      throw new UsageError(
        `mesh ${command} takes ${subs.join(" or ")}, not ${sub ? `"${printable(sub)}"` : "nothing"}`,
      );
    command = `${command} ${sub}`;
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
