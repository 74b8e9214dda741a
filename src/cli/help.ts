// Help as a person reads it, made from the one table: the overview, and each command's usage with every flag
// and its default.
import type { Exit } from "./exits.ts";
import {
  COMMANDS,
  type CommandSpec,
  exitsOf,
  FLAGS,
  type Flag,
  flagsOf,
  flagUsage,
  GLOBAL_FLAGS,
  MESH_COMMANDS,
  MESH_GLOBAL_FLAGS,
  usageLine,
} from "./table.ts";

const column = (rows: [string, string][], indent = 2): string[] => {
  const w = Math.max(...rows.map(([a]) => a.length));
  return rows.map(([a, b]) => `${" ".repeat(indent)}${a.padEnd(w)}  ${b}`);
};

const flagRows = (flags: Flag[]): [string, string][] =>
  flags.map((f) => [flagUsage(f), `${f.help} (default: ${f.default})`]);

/** `mesh-host help`: every command in a line, and where to read more. */
export function overview(): string {
  return [
    "usage: mesh-host <command> [flags]",
    "",
    "commands:",
    ...column([
      ...COMMANDS.map((c): [string, string] => [`${c.name}${c.args ? ` ${c.args}` : ""}`, c.summary]),
      [
        "mesh COMMAND",
        `the operator's half: ${MESH_COMMANDS.map((c) => c.name).join(", ")} (mesh-host mesh --help)`,
      ],
    ]),
    "",
    "global flags (every command):",
    ...column(flagRows(GLOBAL_FLAGS.map((n) => FLAGS[n]))),
    "",
    "`mesh-host help COMMAND` (or `mesh-host COMMAND --help`) lists a command's own flags and exit statuses.",
    "Exit status: 0 done, 1 an apply failed or the link could not be held, 2 refused (bad input).",
  ].join("\n");
}

const exitRows = (exits: readonly Exit[]): string[] => column(exits.map(([c, m]) => [String(c), m]));

/** `mesh-host help CMD`: its usage, what it does, its own flags and the global ones, each with its default. */
export function commandHelp(spec: CommandSpec): string {
  const own = spec.flags.map((n) => FLAGS[n]);
  return [
    `usage: ${usageLine(spec)}`,
    "",
    spec.summary,
    ...(spec.about ? ["", ...wrap(spec.about, 100)] : []),
    ...(own.length ? ["", "flags:", ...column(flagRows(own))] : []),
    "",
    "global flags:",
    ...column(flagRows(GLOBAL_FLAGS.map((n) => FLAGS[n]))),
    "",
    "exit status:",
    ...exitRows(exitsOf(spec)),
  ].join("\n");
}

/** `mesh-host mesh CMD --help`: the operator's command's own usage, flags with their defaults, exit statuses. */
export function meshCommandHelp(spec: CommandSpec): string {
  const own = flagsOf(spec).filter((f) => (spec.flags as readonly string[]).includes(f.name));
  return [
    `usage: mesh-host mesh ${spec.name}${spec.args ? ` ${spec.args}` : ""} [flags]`,
    "",
    spec.summary,
    ...(spec.about ? ["", ...wrap(spec.about, 100)] : []),
    ...(own.length ? ["", "flags:", ...column(flagRows(own))] : []),
    "",
    "flags of every mesh command:",
    ...column(flagRows(MESH_GLOBAL_FLAGS.map((n) => FLAGS[n]))),
    "",
    "exit status:",
    ...exitRows(exitsOf(spec)),
  ].join("\n");
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/)) {
    if (line && line.length + word.length + 1 > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}
