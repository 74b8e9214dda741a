// `mesh push` and `mesh move`: what was sent to whom, and each node's report printed the way `apply` prints it.
import { existsSync, readFileSync, statSync } from "node:fs";
import { MAX_BODY_BYTES } from "../../defaults.ts";
import {
  exitOf,
  type MeshDir,
  markMoved,
  openState,
  type Pushed,
  prepareMove,
  preparePush,
  publishAndWait,
  targetsOf,
} from "../../mesh/index.ts";
import { faultLine } from "../../store/index.ts";
import { parseJsonBytes } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { printable, summary, table, writeJson, writeOut } from "../output.ts";
import { progress } from "../progress.ts";
import { readGivenSecrets } from "../unseal.ts";
import type { MeshArgs } from "./args.ts";

/** FILE as a JSON object, its size checked before it is read. */
function readFile(path: string): Record<string, unknown> {
  let bytes: Buffer;
  try {
    const size = statSync(path).size;
    if (size > MAX_BODY_BYTES)
      throw new UsageError(`${path} is ${size} bytes, more than the ${MAX_BODY_BYTES} allowed`);
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
function oneWordWhy(word: string): string {
  return existsSync(word)
    ? "mesh push needs a node NAME before FILE, or --all"
    : `mesh push ${printable(word)} needs FILE after it, the declaration to push (mesh push NAME... FILE)`;
}

export async function pushCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const file = args.positionals.at(-1);
  const names = args.positionals.slice(0, -1);
  if (!file) throw new UsageError("mesh push needs NAME... FILE, or --all FILE");
  if (args.all && names.length) throw new UsageError("mesh push takes NAME... or --all, not both");
  if (!args.all && !names.length) throw new UsageError(oneWordWhy(file));
  mesh.config();
  const state = await openState(mesh);
  try {
    const targets = await targetsOf(state, names, args.all);
    const input = { file: readFile(file), secrets: readGivenSecrets(args.secret) };
    const composed = await preparePush(state, targets, input);
    const wait = waiting("mesh push", composed);
    const pushed = await publishAndWait(mesh, state, composed, args.waitS * 1000, wait.heard);
    wait.line.clear();
    say(pushed, args);
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

function say(pushed: Pushed[], args: MeshArgs): void {
  if (args.json) {
    writeJson({
      nodes: pushed.map((p) => ({
        node: p.node,
        serial: p.serial,
        seq: p.seq,
        digest: p.digest,
        report: p.report,
      })),
    });
    return;
  }
  for (const p of pushed) {
    // the serial is what a person reads; the stream's sequence is in --json alone
    const head = `${p.node}: serial ${p.serial}`;
    if (!p.report) writeOut(`${head}: ${args.waitS ? `no report within ${args.waitS} s` : "sent"}`);
    else writeOut(`${head}\n${table(p.report.steps)}${summary(p.report)}${refusals(p)}`);
  }
}

function refusals(p: Pushed): string {
  const r = p.report?.refusals ?? [];
  // the node's words: shown escaped, never obeyed by the terminal
  return r
    .map((x) => `\n  refused: ${printable(`${x.id}${x.field ? `.${x.field}` : ""}: ${x.reason}`)}`)
    .join("");
}
