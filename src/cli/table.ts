// The one table of commands and flags: parsing, `help`, the man page and the completions are all read from it,
// so what the help says is what the parser takes. A new command is one entry in COMMANDS (and its handler in
// cli.ts, which the type of HANDLERS demands); a new flag is one entry in FLAGS, named by the commands taking it.
// The operator's commands (`mesh-host mesh …`, MESH_COMMANDS) are read from the same FLAGS by the same parser.
import {
  DEFAULT_ANDROID_STATE_DIR,
  DEFAULT_MESH_DIR,
  DEFAULT_ROOT,
  DEFAULT_STATE_DIR,
  DRIFT_S,
  HEARTBEAT_S,
  MOVE_GRACE_S,
  REDIAL_SPREAD_S,
} from "../defaults.ts";
import { HOST_KINDS } from "../host-kind.ts";
import { ENROL_EXITS, type Exit, HOST_EXITS, MESH_EXITS, STATUS_EXITS } from "./exits.ts";
import { MESH_COMMANDS, MESH_FLAGS } from "./table-mesh.ts";

export interface Flag {
  /** The long name, without `--`. */
  name: string;
  short?: string;
  /** The value's placeholder in help (`DIR`); absent for a switch. */
  value?: string;
  /** May be given more than once; each value is kept. */
  multiple?: boolean;
  /** What help prints as the default. */
  default: string;
  help: string;
  /** The only values accepted (and completed). */
  choices?: readonly string[];
  /** What the shell completes the value with, when not a choice. */
  complete?: "file" | "dir";
}

export const LOG_FORMATS = ["json", "text"] as const;
const flag = (f: Flag): Flag => f;
const seconds = (name: string, v: number, help: string): Flag => ({
  name,
  value: "S",
  default: `${v}`,
  help,
});
/** The default of a flag a command cannot go without: usage shows it unbracketed. */
export const REQUIRED = "none: required";

/** Every flag, by name. */
export const FLAGS = {
  state: flag({
    name: "state",
    value: "DIR",
    default: `$MESH_HOST_STATE, else ${DEFAULT_STATE_DIR} (${DEFAULT_ANDROID_STATE_DIR} on Android)`,
    help: "the node's state directory",
    complete: "dir",
  }),
  root: flag({
    name: "root",
    value: "DIR",
    default: DEFAULT_ROOT,
    help: "every declared path is resolved under DIR",
    complete: "dir",
  }),
  host: flag({
    name: "host",
    value: "KIND",
    default: "detected",
    help: "the kind of machine",
    choices: HOST_KINDS,
  }),
  json: flag({ name: "json", default: "off", help: "stdout is one JSON document and nothing else" }),
  "log-format": flag({
    name: "log-format",
    value: "FORMAT",
    default: "text on a terminal, json otherwise",
    help: "how log lines on stderr look",
    choices: LOG_FORMATS,
  }),
  help: flag({ name: "help", short: "h", default: "off", help: "this help" }),
  version: flag({ name: "version", short: "V", default: "off", help: "the version, as `mesh-host version`" }),
  "dry-run": flag({ name: "dry-run", default: "off", help: "show the plan, change nothing" }),
  verbose: flag({
    name: "verbose",
    default: "off",
    help: "list the unchanged steps too (--json always has them)",
  }),
  diff: flag({
    name: "diff",
    default: "off",
    help: "show each file's changes as a unified diff (never a secret's)",
  }),
  secret: flag({
    name: "secret",
    value: "NAME=FILE",
    multiple: true,
    default: "none",
    help: 'a secret the bundle names "installer", read from FILE (the value alone)',
    complete: "file",
  }),
  mode: flag({
    name: "mode",
    value: "MODE",
    default: "none: required",
    help: "what the operator says this machine is",
    choices: ["adopted", "converged"],
  }),
  server: flag({
    name: "server",
    value: "URL",
    multiple: true,
    default: "none",
    help: "a bus server (instead of the code)",
  }),
  fingerprint: flag({
    name: "fingerprint",
    value: "HEX",
    default: "none",
    help: "the bus certificate's SHA-256 (instead of the code)",
  }),
  node: flag({ name: "node", value: "NAME", default: "none", help: "the node's name (instead of the code)" }),
  token: flag({
    name: "token",
    value: "TOKEN",
    default: "standard input",
    help: "the code's credential: its JWT and seed, white-space apart (or a .creds body); a code made before: its token (readable by every local user while it runs: better on standard input)",
  }),
  replace: flag({ name: "replace", default: "off", help: "enrol again with new keys, records kept" }),
  "code-file": flag({
    name: "code-file",
    value: "F",
    default: "standard input",
    help: "read the enrolment code from the file F",
    complete: "file",
  }),
  tunnel: flag({
    name: "tunnel",
    value: "IF",
    default: "none: required",
    help: "the WireGuard interface whose key becomes the overlay key",
  }),
  "heartbeat-s": seconds("heartbeat-s", HEARTBEAT_S, "seconds between heartbeats"),
  "drift-s": seconds("drift-s", DRIFT_S, "seconds between drift checks (the kept declaration applied again)"),
  "move-grace-s": flag({
    name: "move-grace-s",
    value: "S",
    default: String(MOVE_GRACE_S),
    help: "seconds a new bus has to hold the node before it goes back to the previous one",
  }),
  "redial-spread-s": flag({
    name: "redial-spread-s",
    value: "S",
    default: String(REDIAL_SPREAD_S),
    help: "the first redial after a lost link waits a random time up to S seconds, so a fleet does not return in step",
  }),
  // the operator's (`mesh-host mesh …`)
  mesh: flag({
    name: "mesh",
    value: "DIR",
    default: `$MESH_DIR, else ${DEFAULT_MESH_DIR}`,
    help: "the mesh directory",
    complete: "dir",
  }),
  servers: flag({ name: "servers", value: "N", default: "1", help: "N servers on this machine, a cluster" }),
  only: flag({ name: "only", value: "I", default: "every server", help: "run server I alone" }),
  unit: flag({ name: "unit", default: "off", help: "write a systemd unit a server instead of running them" }),
  "unit-dir": flag({
    name: "unit-dir",
    value: "DIR",
    default: "/etc/systemd/system",
    help: "where --unit writes the units",
    complete: "dir",
  }),
  all: flag({ name: "all", default: "off", help: "every enrolled node, no NAME given" }),
  expires: flag({ name: "expires", value: "DURATION", default: "24h", help: "the code's life, at most 30d" }),
  to: flag({
    name: "to",
    value: "DIR2",
    default: REQUIRED,
    help: "the other mesh's directory",
    complete: "dir",
  }),
  ...MESH_FLAGS,
} as const satisfies Record<string, Flag>;

export type FlagName = keyof typeof FLAGS;
/** Taken by every command. */
export const GLOBAL_FLAGS: readonly FlagName[] = [
  "state",
  "root",
  "host",
  "json",
  "log-format",
  "help",
  "version",
];

export interface CommandSpec {
  name: string;
  /** The positional words, as usage shows them. */
  args?: string;
  /** One line: the command table of `help` and the README. */
  summary: string;
  /** More, for `help CMD` and the man page. */
  about?: string;
  /** Its own flags, besides the global ones. */
  flags: readonly FlagName[];
  /** What one of its flags means here when it is not what FLAGS says (`mesh init --server HOST:PORT`). */
  means?: Partial<Record<FlagName, Partial<Pick<Flag, "value" | "default" | "help">>>>;
  /** Its exit statuses, when they are not the group's (HOST_EXITS, MESH_EXITS: exits.ts). */
  exits?: readonly Exit[];
}

const command = <const N extends string>(c: CommandSpec & { name: N }): CommandSpec & { name: N } => c;

export const COMMANDS = [
  command({
    name: "apply",
    args: "FILE|-",
    summary: "make this machine match the declaration in FILE (no mesh)",
    about:
      "FILE is a declaration body (JSON); - reads it from standard input. The plan is printed, then acted on, " +
      "under the state lock. Refused once the node holds a declaration from the mesh. Ctrl-C stops after the " +
      "step in progress and says how far it got.",
    flags: ["dry-run", "diff", "verbose", "secret"],
  }),
  command({
    name: "plan",
    args: "FILE|-",
    summary: "the same as apply --dry-run: the plan, nothing changed",
    flags: ["diff", "verbose", "secret"],
  }),
  command({
    name: "genesis",
    args: "BUNDLE",
    summary: "the machine's first declaration, from the installer's bundle",
    about:
      "The mode is recorded only when none is, and the bundle is marked consumed by its digest, so " +
      "`reconcile` can refuse any other bytes.",
    flags: ["mode", "dry-run", "diff", "secret"],
  }),
  command({
    name: "enrol",
    summary: "make keys, ask the mesh, save the membership",
    about:
      "The enrolment code is read from standard input (piped or pasted; surrounding white space is not part " +
      "of it) or from a file (the code-file flag), never shown. A code given as an argument still works, but every local " +
      "user can read it in /proc and take the answer with it, and mesh-host says so. Prints the node's name " +
      "and the bus. The parts of the code may be given one by one instead, the credential then on standard input: " +
      "the enrolling user's JWT and its seed separated by white space, or a NATS .creds file's body as it is.",
    flags: ["code-file", "node", "server", "fingerprint", "token", "replace"],
    exits: ENROL_EXITS,
  }),
  command({
    name: "run",
    summary: "hold the node in its mesh until stopped (the service's command)",
    about: "SIGTERM or Ctrl-C finishes the step in progress and exits 0.",
    flags: ["heartbeat-s", "drift-s", "move-grace-s", "redial-spread-s"],
  }),
  command({
    name: "reconcile",
    args: "[BUNDLE]",
    summary: "apply the mesh's last declaration (or the bundle genesis applied) again, now",
    about:
      "Waits for the state lock, verifies the kept envelope again, prints the plan, then acts. A bundle is " +
      "checked against what genesis applied, and applied only while the mesh has not spoken.",
    flags: ["dry-run", "diff", "verbose", "secret"],
  }),
  command({
    name: "status",
    summary: "identity, bus, link, last apply and its failures, holds, mode, outbox",
    about:
      "Exits 1 when the last apply failed or an enrolled node's link is down, 0 when all is well: a " +
      "monitoring check can run it.",
    flags: [],
    exits: STATUS_EXITS,
  }),
  command({
    name: "overlay",
    args: "take",
    summary: "take a found WireGuard tunnel's key as the overlay key; the mesh told first",
    flags: ["tunnel"],
  }),
  command({
    name: "install-service",
    summary: "write the unit and the launcher where no package did",
    about:
      "Each flag of run given here is written into the unit's ExecStart, the state directory as the service sees it inside the root the files are written under.",
    flags: ["heartbeat-s", "drift-s", "move-grace-s", "redial-spread-s"],
  }),
  command({
    name: "version",
    summary: "version, commit, Node runtime inside, host kind",
    flags: [],
  }),
  command({ name: "help", args: "[COMMAND]", summary: "this list, or one command's flags", flags: [] }),
] as const;

export type Command = (typeof COMMANDS)[number]["name"];

export function commandSpec(name: string): CommandSpec | undefined {
  return (COMMANDS as readonly CommandSpec[]).find((c) => c.name === name);
}

/** The flags a command takes: its own, then the global ones (a mesh command's: `--mesh` and `--help`). */
export function flagsOf(spec: CommandSpec): Flag[] {
  const global = isMeshCommand(spec) ? MESH_GLOBAL_FLAGS : GLOBAL_FLAGS;
  return [...new Set([...spec.flags, ...global])].map((n) => ({ ...FLAGS[n], ...spec.means?.[n] }));
}

/** Taken by every operator's command. */
export const MESH_GLOBAL_FLAGS: readonly FlagName[] = ["mesh", "help"];

export { MESH_COMMANDS };

const isMeshCommand = (spec: CommandSpec): boolean => MESH_COMMANDS.includes(spec);

/** The exit statuses of `spec`: its own, else its group's. */
export function exitsOf(spec: CommandSpec): readonly Exit[] {
  return spec.exits ?? (isMeshCommand(spec) ? MESH_EXITS : HOST_EXITS);
}

export function meshCommandSpec(name: string): CommandSpec | undefined {
  return MESH_COMMANDS.find((c) => c.name === name);
}

/** `--state DIR` or `-h, --help`, as help and the man page write a flag. */
export function flagUsage(f: Flag): string {
  const long = `--${f.name}${f.value ? ` ${f.choices ? f.choices.join("|") : f.value}` : ""}`;
  return f.short ? `-${f.short}, ${long}` : long;
}

/** `mesh-host apply FILE|- [flags]` */
export function usageLine(spec: CommandSpec): string {
  return `mesh-host ${spec.name}${spec.args ? ` ${spec.args}` : ""} [flags]`;
}
