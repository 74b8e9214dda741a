// `mesh-host mesh …`: the operator's commands over src/mesh/. Bad or stale input is one line, exit 2, nothing
// changed; no key, password or token is ever printed but the enrolment code `node add` exists to print.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { MESH_FORMAT, SECRET_FILE_MODE } from "../../defaults.ts";
import {
  addNode,
  allNodes,
  checkNodeName,
  fleetOf,
  fleetRows,
  fleetTable,
  type Heard,
  initMesh,
  MeshDir,
  MeshRefused,
  matchingNodes,
  migrate,
  reissueNode,
  removeNode,
  up,
  watch,
  withState,
  writeAtomic,
  writeUnits,
} from "../../mesh/index.ts";
import { printable } from "../../printable.ts";
import { UsageError } from "../args.ts";
import { runningBinary } from "../commands/confirm.ts";
import { meshCommandHelp } from "../help.ts";
import { summary, writeJson, writeOut } from "../output.ts";
import { meshCommandSpec } from "../table.ts";
import { MESH_NODE_USAGE, MESH_RELEASE_USAGE, MESH_USAGE, type MeshArgs, parseMesh } from "./args.ts";
import { jobCommand, jobsCommand, reportCommand } from "./jobs.ts";
import { labelsToAdd, nodeLabelCommand } from "./labels.ts";
import { planCommand } from "./plan.ts";
import { moveCommand, pushCommand } from "./push.ts";
import { releaseAddCommand, releaseLsCommand, releaseRmCommand } from "./release.ts";
import {
  rolloutAbortCommand,
  rolloutCommand,
  rolloutResumeCommand,
  rolloutStatusCommand,
  upgradeCommand,
} from "./rollout.ts";

type Handler = (mesh: MeshDir, args: MeshArgs) => Promise<number>;

const HANDLERS: Record<string, Handler> = {
  init: initCommand,
  up: upCommand,
  "node add": nodeAddCommand,
  "node rm": nodeRmCommand,
  "node reissue": nodeReissueCommand,
  "node label": nodeLabelCommand,
  push: pushCommand,
  plan: planCommand,
  jobs: jobsCommand,
  job: jobCommand,
  report: reportCommand,
  rollout: rolloutCommand,
  "rollout status": rolloutStatusCommand,
  "rollout resume": rolloutResumeCommand,
  "rollout abort": rolloutAbortCommand,
  upgrade: upgradeCommand,
  nodes: nodesCommand,
  watch: watchCommand,
  move: moveCommand,
  migrate: migrateCommand,
  "release add": releaseAddCommand,
  "release ls": releaseLsCommand,
  "release rm": releaseRmCommand,
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
    if (e instanceof MeshRefused) throw new UsageError(e.message);
    // the client's bare word, past the retries: the servers answer, their JetStream (the mesh's state) does not
    if (e instanceof Error && /^timeout$|temporarily unavailable/i.test(e.message))
      throw new Error(
        "the mesh's bus answers but its JetStream did not in time: the state needs a majority of the servers up and answering (is `mesh up` running on enough of them, or are they overloaded?)",
      );
    throw e;
  }
}

/** The help asked for: a command's own (`mesh push --help`, `mesh help push`), `node`'s two, or the group's. */
function helpText(args: MeshArgs): string {
  const name = args.command === "help" ? args.positionals.join(" ") : args.command;
  if (name === "node") return MESH_NODE_USAGE;
  if (name === "release") return MESH_RELEASE_USAGE;
  const spec = meshCommandSpec(name);
  if (spec) return meshCommandHelp(spec);
  if (name) throw new UsageError(`no help for "mesh ${printable(name, 60)}" (see \`mesh-host mesh --help\`)`);
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
  mesh.config();
  if (args.codeFile && existsSync(args.codeFile))
    throw new UsageError(`--code-file ${args.codeFile} exists: not overwritten`);
  const code = await addNode(mesh, name!, args.expiresS, labelsToAdd(args.label));
  if (args.codeFile) {
    writeAtomic(resolve(args.codeFile), `${code}\n`, SECRET_FILE_MODE);
    writeOut(`added ${name}: its enrolment code is in ${args.codeFile}`);
  } else writeOut(code);
  return 0;
}

async function nodeReissueCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [name, ...extra] = args.positionals;
  if (extra.length) throw new UsageError("mesh node reissue takes one NAME");
  checkNodeName(name);
  mesh.config();
  if (args.codeFile && existsSync(args.codeFile))
    throw new UsageError(`--code-file ${args.codeFile} exists: not overwritten`);
  const { code, enrolled } = await reissueNode(mesh, name!, args.expiresS);
  const then = enrolled ? "; on its machine: mesh-host enrol --replace" : "";
  if (args.codeFile) {
    writeAtomic(resolve(args.codeFile), `${code}\n`, SECRET_FILE_MODE);
    writeOut(`reissued ${name}: its new enrolment code is in ${args.codeFile}${then}`);
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

async function migrateCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  noPositionals(args);
  const done = await migrate(mesh, (line) => process.stderr.write(`mesh-host mesh migrate: ${line}\n`));
  if (args.json) writeJson(done);
  else
    writeOut(
      done.kept
        ? `migrated ${mesh.dir} to format ${MESH_FORMAT}: ${done.nodes} node(s), ${done.codes} code(s), ${done.fleet} fleet entr(ies) on the bus, enrolling users in their own account; the old files are in ${done.kept}`
        : `migrated ${mesh.dir} from format ${done.from} to format ${MESH_FORMAT}: enrolling users in their own account (codes issued before still work until spent or expired)`,
    );
  return 0;
}

async function nodesCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  noPositionals(args);
  mesh.config();
  const rows = await withState(mesh, async (state) => {
    const records = await allNodes(state);
    const picked = args.where === null ? null : matchingNodes(records, args.where);
    return fleetRows(
      records.filter((r) => !picked || picked.has(r.node)),
      await fleetOf(state),
    );
  });
  if (args.json) writeJson({ nodes: rows });
  else writeOut(fleetTable(rows));
  return 0;
}

/** One line an event; what the node said in it (its version, its last outcome, its steps) shown escaped. */
function heardLine(e: Heard): string {
  return printable(heardWords(e));
}

function heardWords(e: Heard): string {
  if (e.kind === "heartbeat") {
    const hb = e.heartbeat;
    return `${e.at} heartbeat ${e.node} version ${hb.version} up ${hb.uptime_s}s${hb.confirmed ? " confirmed" : ""}${hb.last ? ` last ${hb.last.outcome} serial ${e.serial ?? "?"}` : ""}`;
  }
  // the serial is what a person reads; the stream's sequence is in --json alone
  const r = e.report;
  // which steps failed, by name: counts alone send the operator to the node to find out
  const p = (t: string) => printable(t, 200);
  const failed = r.steps.filter((s) => s.did === "failed").map((s) => `${p(s.id)} (${p(s.detail)})`);
  const refused = r.refusals.map((x) => `${p(x.id)}${x.field ? `.${p(x.field)}` : ""} (${p(x.reason)})`);
  const why = [
    ...(failed.length ? [`failed: ${failed.join(", ")}`] : []),
    ...(refused.length ? [`refused: ${refused.join(", ")}`] : []),
  ];
  return `${e.at} report ${e.node} serial ${e.serial ?? "?"} ${summary(r)}${why.length ? `; ${why.join("; ")}` : ""}`;
}

async function watchCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  noPositionals(args);
  mesh.config();
  const where = args.where;
  const picked =
    where === null
      ? null
      : await withState(mesh, async (state) => matchingNodes(await allNodes(state), where));
  await watch(
    mesh,
    (e) => {
      if (!picked || picked.has(e.node)) writeOut(args.json ? JSON.stringify(e) : heardLine(e));
    },
    () =>
      process.stderr.write(
        `mesh-host mesh watch: following ${mesh.dir}'s reports and heartbeats; Ctrl-C stops\n`,
      ),
    stopSignal(),
  );
  return 0;
}
