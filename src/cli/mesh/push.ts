// `mesh push` and `mesh move`: what was sent to whom, and each node's report printed the way `apply` prints it.
import { existsSync, readFileSync, statSync } from "node:fs";
import { MAX_BODY_BYTES } from "../../defaults.ts";
import { faultLine } from "../../faults.ts";
import {
  exitOf,
  JobLog,
  type MeshDir,
  markMoved,
  newJob,
  openState,
  type Pushed,
  prepareMove,
  preparePush,
  publishAndWait,
  replacedLine,
  type State,
  selectedNodes,
  targetsOf,
  unrecordedLine,
} from "../../mesh/index.ts";
import { printable } from "../../printable.ts";
import { parseJsonBytes, tooBig } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { summary, table, writeJson, writeOut } from "../output.ts";
import { progress } from "../progress.ts";
import { readGivenSecrets } from "../unseal.ts";
import type { MeshArgs } from "./args.ts";
import { settledJob, warnLine } from "./jobs.ts";

/** FILE as a JSON object, its size checked before it is read. */
export function readDeclaration(path: string): Record<string, unknown> {
  let bytes: Buffer;
  try {
    const size = statSync(path).size;
    if (size > MAX_BODY_BYTES) throw new UsageError(`${path} is ${tooBig(size, MAX_BODY_BYTES)}`);
    bytes = readFileSync(path);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(faultLine(e, "read") ?? `cannot read ${path}`);
  }
  const json = parseJsonBytes(bytes);
  if (!json.ok) throw new UsageError(`${path}: the declaration ${json.reason}`);
  if (typeof json.value !== "object" || json.value === null || Array.isArray(json.value))
    throw new UsageError(`${path}: a declaration is a JSON object`);
  return json.value as Record<string, unknown>;
}

/** `mesh push WORD`: a FILE with no node before it, or (far likelier when it is no file) a node with no FILE. */
function oneWordWhy(verb: string, word: string): string {
  return existsSync(word)
    ? `mesh ${verb} needs a node NAME before FILE, or --all`
    : `mesh ${verb} ${printable(word)} needs FILE after it, the declaration to ${verb} (mesh ${verb} NAME... FILE)`;
}

/** TARGETS FILE as words: the nodes named (or --all, or --where) and the file after them, checked before the bus. */
export function wordsGiven(mesh: MeshDir, args: MeshArgs, verb: string): { names: string[]; file: string } {
  const file = args.positionals.at(-1);
  const names = args.positionals.slice(0, -1);
  if (!file) throw new UsageError(`mesh ${verb} needs NAME... FILE, --all FILE or --where SELECTOR FILE`);
  const ways = [names.length > 0, args.all, args.where !== null].filter(Boolean).length;
  if (ways > 1) throw new UsageError(`mesh ${verb} takes NAME..., --all or --where, one of them`);
  if (!ways) throw new UsageError(oneWordWhy(verb, file));
  mesh.config();
  return { names, file };
}

/** The targets the words name, each enrolled; a selector's, or a refusal naming what is wrong. */
export async function targetsGiven(state: State, args: MeshArgs, names: string[]): Promise<string[]> {
  if (args.where !== null) return await selectedNodes(state, args.where);
  return await targetsOf(state, names, args.all);
}

export async function pushCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const { names, file } = wordsGiven(mesh, args, "push");
  // the bus first, then the nodes, then FILE: a push without the bus says so whatever else is wrong
  const state = await openState(mesh);
  try {
    const targets = await targetsGiven(state, args, names);
    const input = {
      file: readDeclaration(file),
      secrets: readGivenSecrets(args.secret),
      allowRemovals: args.allowRemovals,
    };
    const composed = await preparePush(state, targets, input);
    const jobs = await JobLog.open(mesh, state.bus, warnLine("mesh push"));
    const job = newJob("push", input.file, composed);
    await jobs.start(job);
    const wait = waiting("mesh push", composed);
    const pushed = await publishAndWait(mesh, state, composed, args.waitS * 1000, wait.heard);
    wait.line.clear();
    sayUnrecorded("mesh push", pushed);
    await jobs.save(settledJob(job, pushed, args.waitS));
    say(pushed, args, job.id);
    return args.waitS === 0 ? 0 : exitOf(pushed);
  } finally {
    await state.bus.close();
  }
}

export async function moveCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [name, ...extra] = args.positionals;
  if (!name || extra.length) throw new UsageError("mesh move takes one NAME");
  if (!args.to)
    throw new UsageError("mesh move needs --to DIR2: the other mesh, made by `mesh-host mesh init`");
  mesh.config();
  const state = await openState(mesh);
  try {
    const { composed, to } = await prepareMove(mesh, state, name, args.to);
    const wait = waiting("mesh move", composed);
    const pushed = await publishAndWait(mesh, state, composed, args.waitS * 1000, wait.heard);
    wait.line.clear();
    sayUnrecorded("mesh move", pushed);
    const code = exitOf(pushed);
    if (code === 0) await markMoved(state, name, to);
    say(pushed, args);
    if (!args.json && code === 0)
      writeOut(
        `moved ${name}: it now dials ${to.urls().join(", ")} (\`mesh-host mesh node rm ${name}\` here once it is heard there)`,
      );
    return code;
  } finally {
    await state.bus.close();
  }
}

/**
 * The wait for reports, said on stderr: on a terminal one line of how many nodes have reported and who is left,
 * off one a line as each report arrives; cleared before the reports print.
 */
function waiting(prefix: string, composed: { node: string }[]) {
  const line = progress(prefix);
  const left = new Set(composed.map((c) => c.node));
  const heard = (reported: number, of: number, node: string | null, outcome?: string) => {
    if (node) left.delete(node);
    const rest = [...left].slice(0, 3).join(", ") + (left.size > 3 ? `, +${left.size - 3}` : "");
    const said = node ? `${node} reported ${outcome}; ` : "";
    line.step(`${said}${reported} of ${of} reported${left.size ? `, waiting on ${rest}` : ""}`);
  };
  return { line, heard };
}

function sayUnrecorded(prefix: string, pushed: Pushed[]): void {
  const line = unrecordedLine(pushed);
  if (line) warnLine(prefix)(line);
}

function say(pushed: Pushed[], args: MeshArgs, job?: string): void {
  if (args.json) {
    writeJson({
      ...(job ? { job } : {}),
      nodes: pushed.map((p) => ({
        node: p.node,
        serial: p.serial,
        seq: p.seq,
        digest: p.digest,
        report: p.report,
        ...(p.replacedBy ? { replaced_by: p.replacedBy } : {}),
        ...(p.unrecorded ? { unrecorded: p.unrecorded } : {}),
      })),
    });
    return;
  }
  for (const p of pushed) {
    // the serial is what a person reads; the stream's sequence is in --json alone
    const head = `${p.node}: serial ${p.serial}`;
    if (p.replacedBy) writeOut(`${head}: ${replacedLine(p.replacedBy)}`);
    else if (!p.report) writeOut(`${head}: ${args.waitS ? `no report within ${args.waitS} s` : "sent"}`);
    else writeOut(`${head}\n${table(p.report.steps)}${summary(p.report)}${refusals(p)}`);
  }
  if (job) writeOut(`job ${job} (mesh-host mesh job ${job})`);
}

function refusals(p: Pushed): string {
  const r = p.report?.refusals ?? [];
  // the node's words: shown escaped, never obeyed by the terminal
  return r
    .map((x) => `\n  refused: ${printable(`${x.id}${x.field ? `.${x.field}` : ""}: ${x.reason}`)}`)
    .join("");
}
