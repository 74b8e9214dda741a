// The man page and the bash and zsh completions, made at build time from the one table (table.ts) the parser
// and `help` read: none of them can name a flag the executable does not take, nor miss one it does.

import { DEFAULT_STATE_DIR } from "../defaults.ts";
import { type Exit, HOST_EXITS, MESH_EXITS } from "./exits.ts";
import { MESH_USAGE } from "./mesh/args.ts";
import {
  COMMANDS,
  type CommandSpec,
  FLAGS,
  type Flag,
  flagsOf,
  GLOBAL_FLAGS,
  MESH_COMMANDS,
  MESH_GLOBAL_FLAGS,
} from "./table.ts";

export { commandsMarkdown } from "./reference.ts";

/** Text as roff reads it: backslashes escaped, hyphens literal, no line taken for a request. */
function roff(text: string): string {
  return text
    .replace(/\\/g, "\\e")
    .replace(/-/g, "\\-")
    .replace(/^([.'])/gm, "\\&$1");
}

function roffFlag(f: Flag): string[] {
  const value = f.value ? ` \\fI${roff(f.choices ? f.choices.join("|") : f.value)}\\fR` : "";
  const names = f.short
    ? `\\fB\\-${f.short}\\fR, \\fB\\-\\-${roff(f.name)}\\fR`
    : `\\fB\\-\\-${roff(f.name)}\\fR`;
  return [".TP", `${names}${value}`, `${roff(f.help)} (default: ${roff(f.default)}).`];
}

/** A command's own flags as this page names them (a mesh command's read with what they mean there). */
const ownFlags = (c: CommandSpec): Flag[] =>
  flagsOf(c).filter((f) => (c.flags as readonly string[]).includes(f.name));

function roffExits(exits: readonly Exit[]): string[] {
  return exits.flatMap(([code, meaning]) => [".TP", `.B ${code}`, `${roff(meaning)}.`]);
}

function roffCommand(c: CommandSpec, prefix = ""): string[] {
  const own = ownFlags(c);
  return [
    ".TP",
    `\\fB${roff(prefix + c.name)}\\fR${c.args ? ` \\fI${roff(c.args)}\\fR` : ""}`,
    `${roff(c.summary)}.`,
    ...(c.about ? [roff(c.about)] : []),
    ...(own.length ? [".RS", ...own.flatMap(roffFlag), ".RE"] : []),
    ...(c.exits ? [".RS", "Exit status:", ...roffExits(c.exits), ".RE"] : []),
  ];
}

/** mesh-host(1). */
export function manPage(version: string): string {
  return [...manHead(version), ...manCommands(), ...manExitStatus(), ...manEnvironment(), ""].join("\n");
}

function manHead(version: string): string[] {
  return [
    `.TH MESH\\-HOST 1 "" "mesh\\-host ${roff(version)}" "User Commands"`,
    ".SH NAME",
    "mesh\\-host \\- the agent on every machine of a self\\-hosted mesh",
    ".SH SYNOPSIS",
    ".B mesh\\-host",
    ".I command",
    "[\\fIflags\\fR]",
    ".SH DESCRIPTION",
    roff(
      "mesh-host holds one outbound TLS link to the mesh's bus, hears signed declarations, makes this machine " +
        "match them, reads the result back and reports it. Without a mesh, apply makes the machine match a " +
        "declaration in a file. Logs go to standard error, never standard output: JSON lines, or one short line " +
        "each on a terminal; under systemd each carries its journald priority.",
    ),
  ];
}

function manCommands(): string[] {
  return [
    ".SH COMMANDS",
    ...COMMANDS.flatMap((c) => roffCommand(c)),
    ...manMesh(),
    ".SH GLOBAL FLAGS",
    "Every command takes these.",
    ...GLOBAL_FLAGS.map((n) => FLAGS[n]).flatMap(roffFlag),
  ];
}

/** `mesh COMMAND`: the usage `mesh-host mesh --help` prints; each command's flags are in mesh-host-mesh(1). */
function manMesh(): string[] {
  return [
    ".TP",
    "\\fBmesh\\fR \\fICOMMAND\\fR",
    roff("The operator's half, with flags of its own: see mesh-host-mesh(1) (mesh-host mesh --help):"),
    ".RS",
    ".nf",
    roff(MESH_USAGE),
    ".fi",
    ".RE",
  ];
}

function manExitStatus(): string[] {
  return [".SH EXIT STATUS", roff("Unless a command above says otherwise:"), ...roffExits(HOST_EXITS)];
}

/** ENVIRONMENT, FILES and SEE ALSO. */
function manEnvironment(): string[] {
  return [
    ".SH ENVIRONMENT",
    ".TP",
    ".B MESH_LOG",
    roff("The log level: trace, debug, info (the default), warn, error, fatal or silent."),
    ".TP",
    ".B MESH_HOST_STATE",
    roff("The state directory, when --state is not given."),
    ".TP",
    ".B JOURNAL_STREAM",
    roff(
      "Set by systemd: when it names standard error, each log line starts with its journald priority <N>.",
    ),
    ".SH FILES",
    ".TP",
    `.I ${roff(DEFAULT_STATE_DIR)}`,
    roff(
      "The state directory (0700): identity keys, membership, the kept declaration, records, holds, the " +
        "outbox, last.json and last-report.json (the last apply's report), run.json (what the running host says " +
        "of its link), the lock.",
    ),
    ".SH SEE ALSO",
    ".BR mesh\\-host\\-mesh (1),",
    ".BR systemctl (1),",
    ".BR journalctl (1)",
  ];
}

/** mesh-host-mesh(1): the operator's commands, each with its flags, their defaults and its exit statuses. */
export function meshManPage(version: string): string {
  return [
    `.TH MESH\\-HOST\\-MESH 1 "" "mesh\\-host ${roff(version)}" "User Commands"`,
    ".SH NAME",
    "mesh\\-host\\-mesh \\- the operator's half of mesh\\-host: make a mesh, run its bus, add nodes, push",
    ".SH SYNOPSIS",
    ".B mesh\\-host mesh",
    ".I command",
    "[\\fB\\-\\-mesh\\fR \\fIDIR\\fR] [\\fIflags\\fR]",
    ".SH DESCRIPTION",
    roff(
      "The smallest controller that speaks the mesh's protocol: it makes the mesh directory (signing key, TLS " +
        "certificate, nats-server configuration), runs the servers, adds and revokes nodes, signs and pushes " +
        "declarations and shows what the nodes report. Every wrong or stale input is one line on standard " +
        "error, exit status 2, nothing changed.",
    ),
    ".SH COMMANDS",
    ...MESH_COMMANDS.flatMap((c) => roffCommand(c, "mesh ")),
    ".SH FLAGS OF EVERY MESH COMMAND",
    ...MESH_GLOBAL_FLAGS.map((n) => FLAGS[n]).flatMap(roffFlag),
    ".SH EXIT STATUS",
    roff("Unless a command above says otherwise:"),
    ...roffExits(MESH_EXITS),
    ".SH ENVIRONMENT",
    ".TP",
    ".B MESH_DIR",
    roff("The mesh directory, when --mesh is not given."),
    ".SH FILES",
    ".TP",
    `.I ${roff(FLAGS.mesh.default.replace(/^.*else /, ""))}`,
    roff(
      "The mesh directory (0700): mesh.json, signing.key and accounts.json (0600), tls/, servers/<i>/: keys and " +
        "configuration only; the nodes, codes and fleet view are in the mesh's buckets on the bus. " +
        "Back it up whole: without signing.key no node takes a declaration.",
    ),
    ".SH SEE ALSO",
    ".BR mesh\\-host (1),",
    ".BR nats\\-server (8)",
    "",
  ].join("\n");
}

const commandNames = () => [...COMMANDS.map((c) => c.name), "mesh"].join(" ");
/** The operator's subcommands by their first word (`node add` and `node rm` are both `node`). */
const meshWords = () => [...new Set(MESH_COMMANDS.map((c) => c.name.split(" ")[0]!))];
/** The flags each first word takes, with the operator's global ones. */
const meshFlagsOf = (word: string) => [
  ...new Map(
    MESH_COMMANDS.filter((c) => c.name.split(" ")[0] === word)
      .flatMap(flagsOf)
      .map((f) => [f.name, f]),
  ).values(),
];
const longNames = (flags: Flag[]) =>
  flags.map((f) => `--${f.name}${f.short ? ` -${f.short}` : ""}`).join(" ");
/** The commands whose arguments are files (a declaration, a bundle). */
const TAKES_FILE = new Set(["apply", "plan", "genesis", "reconcile"]);

/** bash: the flags of each operator's subcommand, by the word after `mesh`. */
const meshCases = () =>
  meshWords()
    .map((w) => `        ${w}) flags="${longNames(meshFlagsOf(w))}" ;;`)
    .join("\n");

/** /usr/share/bash-completion/completions/mesh-host */
export function bashCompletion(): string {
  const all = Object.values(FLAGS) as Flag[];
  const valued = all.filter((f) => f.value);
  const cases = valued.map((f) => {
    const words = f.choices
      ? `COMPREPLY=($(compgen -W "${f.choices.join(" ")}" -- "$cur"))`
      : f.complete === "dir"
        ? `COMPREPLY=($(compgen -d -- "$cur"))`
        : f.complete === "file"
          ? `COMPREPLY=($(compgen -f -- "$cur"))`
          : "COMPREPLY=()";
    return `    --${f.name}) ${words}; return ;;`;
  });
  const perCommand = COMMANDS.map((c) => `    ${c.name}) flags="${longNames(flagsOf(c))}" ;;`);
  return `# bash completion for mesh-host (made from its command table at build time)
_mesh_host() {
  local cur prev cmd="" flags i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local commands="${commandNames()}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    case " $commands " in *" \${COMP_WORDS[i]} "*) cmd="\${COMP_WORDS[i]}"; break ;; esac
  done
  case "$prev" in
${cases.join("\n")}
  esac
  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W "${longNames(GLOBAL_FLAGS.map((n) => FLAGS[n]))}" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    fi
    return
  fi
  case "$cmd" in
${perCommand.join("\n")}
  esac
  if [[ $cmd == mesh ]]; then
    if [[ $prev == mesh ]]; then
      COMPREPLY=($(compgen -W "${meshWords().join(" ")}" -- "$cur"))
    elif [[ $cur == -* ]]; then
      case "\${COMP_WORDS[i+1]}" in
${meshCases()}
        *) flags="${longNames(MESH_GLOBAL_FLAGS.map((n) => FLAGS[n]))}" ;;
      esac
      COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    fi
    return
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  elif [[ $cmd == help ]]; then
    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
  elif [[ " ${[...TAKES_FILE].join(" ")} " == *" $cmd "* ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _mesh_host mesh-host
`;
}

/** zsh's _arguments spec of one flag: `--state[the node's state directory]:DIR:_files -/`. */
function zshFlag(f: Flag): string[] {
  const help = f.help.replace(/[[\]:']/g, (c) => (c === "'" ? "'\\''" : `\\${c}`));
  // a colon in the placeholder (HOST:PORT) would end zsh's message field
  const value = f.value?.replace(/:/g, "\\:");
  const action = f.choices
    ? `:${value}:(${f.choices.join(" ")})`
    : f.complete === "dir"
      ? `:${value}:_files -/`
      : f.complete === "file"
        ? `:${value}:_files`
        : f.value
          ? `:${value}: `
          : "";
  const repeat = f.multiple ? "*" : "";
  const spec = (name: string) => `'${repeat}${name}[${help}]${action}'`;
  return f.short ? [spec(`--${f.name}`), spec(`-${f.short}`)] : [spec(`--${f.name}`)];
}

/** zsh: every operator's flag once (zsh's _arguments takes one spec a flag, whichever subcommand it is for). */
const meshZshFlags = () =>
  [...new Map(MESH_COMMANDS.flatMap(flagsOf).map((f) => [f.name, f])).values()].flatMap(zshFlag).join(" ");

/** /usr/share/zsh/site-functions/_mesh-host */
export function zshCompletion(): string {
  const described = [
    ...COMMANDS,
    { name: "mesh", summary: "the operator's half (mesh-host mesh --help)" },
  ].map((c) => `    '${c.name}:${c.summary.replace(/[:']/g, (ch) => (ch === "'" ? "'\\''" : "\\:"))}'`);
  const perCommand = COMMANDS.map((c) => {
    const rest = TAKES_FILE.has(c.name)
      ? ` '*:file:_files'`
      : c.name === "help"
        ? ` '1:command:(${commandNames()})'`
        : "";
    return `    ${c.name}) _arguments ${flagsOf(c).flatMap(zshFlag).join(" ")}${rest} ;;`;
  });
  perCommand.push(`    mesh) _arguments '1:command:(${meshWords().join(" ")})' ${meshZshFlags()} ;;`);
  return `#compdef mesh-host
# zsh completion for mesh-host (made from its command table at build time)
_mesh-host() {
  local -a commands
  commands=(
${described.join("\n")}
  )
  if (( CURRENT == 2 )); then
    _describe command commands
    return
  fi
  shift words
  (( CURRENT-- ))
  case $words[1] in
${perCommand.join("\n")}
  esac
}
_mesh-host "$@"
`;
}
