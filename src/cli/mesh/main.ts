// `mesh-host mesh …`: the operator's commands over src/mesh/. Bad or stale input is one line, exit 2, nothing
// changed; no key, password or token is ever printed but the enrolment code `node add` exists to print.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { SECRET_FILE_MODE } from "../../defaults.ts";
import {
  addNode,
  checkExpires,
  checkNodeName,
  fleetRows,
  fleetTable,
  type Heard,
  initMesh,
  LockBusy,
  MeshDir,
  MeshRefused,
  removeNode,
  up,
  watch,
  writeAtomic,
  writeUnits,
} from "../../mesh/index.ts";
import { printable, UsageError } from "../args.ts";
import { runningBinary } from "../commands/confirm.ts";
import { meshCommandHelp } from "../help.ts";
import { summary, writeJson, writeOut } from "../output.ts";
import { meshCommandSpec } from "../table.ts";
import { MESH_NODE_USAGE, MESH_USAGE, type MeshArgs, parseMesh } from "./args.ts";
import { moveCommand, pushCommand } from "./push.ts";

type Handler = (mesh: MeshDir, args: MeshArgs) => Promise<number>;

const HANDLERS: Record<string, Handler> = {
  init: initCommand,
  up: upCommand,
  "node add": nodeAddCommand,
  "node rm": nodeRmCommand,
  push: pushCommand,
  nodes: nodesCommand,
  watch: watchCommand,
  move: moveCommand,
};

export async function meshMain(argv: string[]): Promise<number> {
  const args = parseMesh(argv);
  if (args.help) {
    writeOut(helpText(args));
    return 0;
  }
  try {
    return await HANDLERS[args.command]!(new MeshDir(resolve(args.dir)), args);
  } catch (e) {
    if (e instanceof MeshRefused || e instanceof LockBusy) throw new UsageError(e.message);
    throw e;
  }
}

/** The help asked for: a command's own (`mesh push --help`, `mesh help push`), `node`'s two, or the group's. */
function helpText(args: MeshArgs): string {
  const name = args.command === "help" ? args.positionals.join(" ") : args.command;
  if (name === "node") return MESH_NODE_USAGE;
  const spec = meshCommandSpec(name);
  if (spec) return meshCommandHelp(spec);
  if (name) throw new UsageError(`no help for "mesh ${printable(name)}" (see \`mesh-host mesh --help\`)`);
  return MESH_USAGE;
}

function noPositionals(args: MeshArgs): void {
  if (args.positionals.length)
    throw new UsageError(`mesh ${args.command} takes no argument "${args.positionals[0]}"`);
}

async function initCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  noPositionals(args);
  const config = initMesh({ dir: mesh.dir, servers: args.server, count: args.servers });
  const urls = config.servers.map((s) => `nats://${s.host}:${s.port}`);
  if (args.json)
    writeJson({ mesh: mesh.dir, servers: urls, fingerprint: config.fingerprint, mesh_key: config.mesh_key });
  else
    writeOut(
      [
        `mesh made in ${mesh.dir}`,
        `  servers:     ${urls.join(", ")}`,
        `  fingerprint: ${config.fingerprint}  (what nodes pin)`,
        `  mesh key:    ${config.mesh_key}  (what declarations are signed by)`,
        "next: `mesh-host mesh up`, then `mesh-host mesh node add NAME`",
      ].join("\n"),
    );
  return 0;
}

/** Resolves on the first SIGINT or SIGTERM: the long-running commands stop cleanly. */
function stopSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
}

async function upCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  noPositionals(args);
  mesh.config();
  if (args.unit) {
    if (!existsSync(args.unitDir)) throw new UsageError(`--unit-dir ${args.unitDir} does not exist`);
    const self = runningBinary();
    const command = self ? [self] : [process.execPath, ...process.execArgv, process.argv[1]!];
    for (const path of writeUnits(mesh, args.unitDir, args.only, command)) writeOut(`wrote ${path}`);
    return 0;
  }
  return await up(mesh, {
    only: args.only,
    say: (line) => writeOut(line),
    warn: (line) => process.stderr.write(`mesh-host mesh up: ${line}\n`),
    stop: stopSignal(),
  });
}

async function nodeAddCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [name, ...extra] = args.positionals;
  if (extra.length) throw new UsageError("mesh node add takes one NAME");
  checkNodeName(name);
  const expiresS = checkExpires(args.expiresS ?? undefined);
  mesh.config();
  if (args.codeFile && existsSync(args.codeFile))
    throw new UsageError(`--code-file ${args.codeFile} exists: not overwritten`);
  const code = await addNode(mesh, name!, expiresS);
  if (args.codeFile) {
    writeAtomic(resolve(args.codeFile), `${code}\n`, SECRET_FILE_MODE);
    writeOut(`added ${name}: its enrolment code is in ${args.codeFile}`);
  } else writeOut(code);
  return 0;
}

async function nodeRmCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [name, ...extra] = args.positionals;
  if (extra.length) throw new UsageError("mesh node rm takes one NAME");
  checkNodeName(name);
  mesh.config();
  await removeNode(mesh, name!);
  writeOut(`removed ${name}: its user is revoked (cut off now), its consumer and record are gone`);
  return 0;
}

async function nodesCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  noPositionals(args);
  mesh.config();
  const rows = fleetRows(mesh.nodes(), mesh.fleet());
  if (args.json) writeJson({ nodes: rows });
  else writeOut(fleetTable(rows));
  return 0;
}

function heardLine(e: Heard): string {
  if (e.kind === "heartbeat") {
    const hb = e.heartbeat;
    return `${e.at} heartbeat ${e.node} version ${hb.version} up ${hb.uptime_s}s${hb.confirmed ? " confirmed" : ""}${hb.last ? ` last ${hb.last.outcome} seq ${hb.last.seq}` : ""}`;
  }
  const r = e.report;
  return `${e.at} report ${e.node} serial ${e.serial ?? "?"} seq ${r.declaration.seq} ${summary(r)}`;
}

async function watchCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  noPositionals(args);
  mesh.config();
  await watch(
    mesh,
    (e) => writeOut(args.json ? JSON.stringify(e) : heardLine(e)),
    () =>
      process.stderr.write(
        `mesh-host mesh watch: following ${mesh.dir}'s reports and heartbeats; Ctrl-C stops\n`,
      ),
    stopSignal(),
  );
  return 0;
}
