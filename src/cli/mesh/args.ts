// `mesh-host mesh …` flags: each subcommand takes its own, anything else is refused in our words.
import { parseArgs } from "node:util";
import { DEFAULT_MESH_DIR, PUSH_WAIT_S } from "../../defaults.ts";
import { UsageError } from "../args.ts";

export const MESH_USAGE = `usage: mesh-host mesh <command> [--mesh DIR] [flags]
  init [--server HOST:PORT]... [--servers N]   a new mesh: signing key, TLS certificate, nats-server configuration
  up [--only I] [--unit [--unit-dir DIR]]       run the servers and the controller until stopped (or write units)
  node add NAME [--code-file F]                 add a node; prints its enrolment code (or writes it to F, 0600)
  node rm NAME                                  revoke a node: its users, consumer and record
  push NAME... FILE | push --all FILE [--secret KEY=FILE]... [--wait-s 60] [--json]
                                                sign and push a declaration, wait for the reports
  nodes [--json]                                the fleet at a glance, silent nodes first
  watch [--json]                                reports and heartbeats as they arrive
  move NAME --to DIR2 [--wait-s 60]             move a node to another mesh made by init
--mesh DIR defaults to $MESH_DIR, else ${DEFAULT_MESH_DIR}`;

const FLAGS = {
  mesh: { type: "string" },
  json: { type: "boolean" },
  server: { type: "string", multiple: true },
  servers: { type: "string" },
  only: { type: "string" },
  unit: { type: "boolean" },
  "unit-dir": { type: "string" },
  "code-file": { type: "string" },
  all: { type: "boolean" },
  secret: { type: "string", multiple: true },
  "wait-s": { type: "string" },
  to: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;
type Flag = keyof typeof FLAGS;

/** Which flags each subcommand takes (`--mesh` and `--help` go with all). */
const ALLOWED: Record<string, Flag[]> = {
  init: ["server", "servers", "json"],
  up: ["only", "unit", "unit-dir"],
  "node add": ["code-file"],
  "node rm": [],
  push: ["all", "secret", "wait-s", "json"],
  nodes: ["json"],
  watch: ["json"],
  move: ["to", "wait-s", "json"],
};

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
  secret: string[];
  waitS: number;
  to: string | null;
  help: boolean;
}

function count(flag: string, value: string | undefined, min: number): number | null {
  if (value === undefined) return null;
  if (!/^\d{1,6}$/.test(value) || Number(value) < min || Number(value) > 86_400)
    throw new UsageError(`--${flag} must be a whole number from ${min}, not "${value}"`);
  return Number(value);
}

export function parseMesh(argv: string[]): MeshArgs {
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: FLAGS, allowPositionals: true, strict: true });
  } catch (e) {
    const m = /'(-[^']*)'/.exec((e as Error).message);
    const code = (e as { code?: string }).code;
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE")
      throw new UsageError(`${m?.[1] ?? "a flag"} needs a value`);
    throw new UsageError(`unknown flag ${m?.[1] ?? "given"} (mesh-host mesh --help lists them)`);
  }
  const v = parsed.values;
  let [command = "help", ...positionals] = parsed.positionals;
  if (command === "node") {
    const sub = positionals.shift();
    if (sub !== "add" && sub !== "rm")
      throw new UsageError(`mesh node takes add or rm, not ${sub ? `"${sub}"` : "nothing"}`);
    command = `node ${sub}`;
  }
  if (command !== "help" && !ALLOWED[command])
    throw new UsageError(
      `unknown mesh command "${command}" (init, up, node add, node rm, push, nodes, watch, move)`,
    );
  for (const flag of Object.keys(v) as Flag[])
    if (command !== "help" && flag !== "mesh" && flag !== "help" && !ALLOWED[command]!.includes(flag))
      throw new UsageError(`mesh ${command} does not take --${flag}`);
  return {
    command,
    positionals,
    dir: (v.mesh as string | undefined) ?? process.env.MESH_DIR ?? DEFAULT_MESH_DIR,
    json: Boolean(v.json),
    server: (v.server as string[] | undefined) ?? [],
    servers: count("servers", v.servers as string | undefined, 1),
    only: count("only", v.only as string | undefined, 1),
    unit: Boolean(v.unit),
    unitDir: (v["unit-dir"] as string | undefined) ?? "/etc/systemd/system",
    codeFile: (v["code-file"] as string | undefined) ?? null,
    all: Boolean(v.all),
    secret: (v.secret as string[] | undefined) ?? [],
    waitS: count("wait-s", v["wait-s"] as string | undefined, 0) ?? PUSH_WAIT_S,
    to: (v.to as string | undefined) ?? null,
    help: Boolean(v.help) || command === "help",
  };
}
