// docs/commands.md, made from the one table (table.ts) as the man pages are: every command, its usage, what it
// does, its flags with their defaults, and its exit statuses. test/e2e/docs.test.ts holds the file to this text;
// `node build/docs.mjs --reference` writes it.
import { type Exit, HOST_EXITS, MESH_EXITS } from "./exits.ts";
import { MESH_USAGE } from "./mesh/args.ts";
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
} from "./table.ts";

/** A table cell: pipes escaped, so `FILE|-` stays one cell. */
const cell = (text: string): string => text.replace(/\|/g, "\\|");

function flagTable(flags: Flag[]): string[] {
  if (!flags.length) return [];
  return [
    "| flag | means | default |",
    "| --- | --- | --- |",
    ...flags.map((f) => `| \`${cell(flagUsage(f))}\` | ${cell(f.help)} | ${cell(f.default)} |`),
    "",
  ];
}

function exitTable(exits: readonly Exit[]): string[] {
  return ["| exit | means |", "| --- | --- |", ...exits.map(([c, m]) => `| ${c} | ${cell(m)} |`), ""];
}

function section(spec: CommandSpec, prefix: string): string[] {
  const own = flagsOf(spec).filter((f) => (spec.flags as readonly string[]).includes(f.name));
  return [
    `### \`${prefix}${spec.name}\``,
    "",
    "```text",
    `${prefix}${spec.name}${spec.args ? ` ${spec.args}` : ""} [flags]`,
    "```",
    "",
    `${spec.summary[0]!.toUpperCase()}${spec.summary.slice(1)}.${spec.about ? ` ${spec.about}` : ""}`,
    "",
    ...flagTable(own),
    ...(spec.exits ? exitTable(exitsOf(spec)) : []),
  ];
}

/** The whole of docs/commands.md. */
export function commandsMarkdown(): string {
  return [
    "# Commands",
    "",
    "Every command of `mesh-host`, its flags with their defaults, and its exit statuses. This file is made from",
    "the command table the parser reads (`src/cli/table.ts`), as the man pages `mesh-host(1)` and",
    "`mesh-host-mesh(1)` and `mesh-host COMMAND --help` are: `node build/docs.mjs --reference` writes it, and",
    "`test/e2e/docs.test.ts` fails when it differs. Do not edit it by hand.",
    "",
    "## The host's commands",
    "",
    "Every one of them also takes the global flags:",
    "",
    ...flagTable(GLOBAL_FLAGS.map((n) => FLAGS[n])),
    "Unless a command says otherwise, its exit status means:",
    "",
    ...exitTable(HOST_EXITS),
    ...COMMANDS.flatMap((c) => section(c, "mesh-host ")),
    "## The operator's commands: `mesh-host mesh …`",
    "",
    "```text",
    MESH_USAGE,
    "```",
    "",
    "Every one of them also takes:",
    "",
    ...flagTable(MESH_GLOBAL_FLAGS.map((n) => FLAGS[n])),
    "Unless a command says otherwise, its exit status means:",
    "",
    ...exitTable(MESH_EXITS),
    ...MESH_COMMANDS.flatMap((c) => section(c, "mesh-host mesh ")),
  ].join("\n");
}
