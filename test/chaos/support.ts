// What every chaos scenario shares: temp dirs, snapshots without mtimes, a seeded random, a tally, and the
// mesh-host CLI as a real process that can be SIGKILLed. No vitest import: scripts/chaos.ts runs this too.
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { bundleOptions, ENTRY, ROOT } from "../../build/bundle.mjs";
import { TEMP_MARKER } from "../../src/defaults.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { killGroup, spawnGroup } from "../support/processes.ts";

export const REPO = ROOT;

/** What one scenario says when it ends: how often it tried, how often everything held, and what did not. */
export interface Outcome {
  tried: number;
  held: number;
  failures: string[];
  /** Measurements worth printing beside the table (timings, how many kills landed). */
  notes: string[];
}

export interface RunOptions {
  long: boolean;
  /** Fixes every random choice; printed with each failure so a run can be replayed. */
  seed: number;
  /** Progress lines for a person watching a long run. */
  progress?: (line: string) => void;
}

export interface Scenario {
  key: string;
  title: string;
  run(opts: RunOptions): Promise<Outcome>;
}

/** Counts tries; a try holds when its check returns no problems and does not throw. */
export class Tally {
  tried = 0;
  held = 0;
  readonly failures: string[] = [];
  readonly notes: string[] = [];
  constructor(private readonly maxFailures = 20) {}

  async try(label: string, check: () => Promise<string[]> | string[]): Promise<boolean> {
    this.tried++;
    let problems: string[];
    try {
      problems = await check();
    } catch (e) {
      problems = [`threw: ${(e as Error)?.stack?.split("\n").slice(0, 4).join(" | ") ?? String(e)}`];
    }
    if (!problems.length) {
      this.held++;
      return true;
    }
    if (this.failures.length < this.maxFailures)
      this.failures.push(
        `${label}: ${problems.slice(0, 6).join("; ")}${problems.length > 6 ? ` (+${problems.length - 6} more)` : ""}`,
      );
    return false;
  }

  outcome(): Outcome {
    return { tried: this.tried, held: this.held, failures: this.failures, notes: this.notes };
  }
}

// ---------------------------------------------------------------- temp dirs

const made: string[] = [];
let cleanupHooked = false;

/** A temp directory removed when the process exits (or earlier by `removeTemps`). */
export function tempDir(prefix = "mesh-chaos-"): string {
  if (!cleanupHooked) {
    cleanupHooked = true;
    process.on("exit", removeTemps);
  }
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export function removeTemps(): void {
  while (made.length) rmSync(made.pop()!, { recursive: true, force: true });
}

export function removeTemp(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  const i = made.indexOf(dir);
  if (i >= 0) made.splice(i, 1);
}

// ---------------------------------------------------------------- snapshots

export const sha = (data: Uint8Array | string): string => createHash("sha256").update(data).digest("hex");

export function isTemp(name: string): boolean {
  return name.includes(TEMP_MARKER);
}

export interface SnapOptions {
  /** Keep mtimes in the entries: equal snapshots then mean nothing was even rewritten. */
  mtimes?: boolean;
  /** Leave out temp files (names with .mesh-tmp-). */
  skipTemps?: boolean;
  /** Relative paths (from `dir`, with a leading /) not descended into or listed. */
  skip?: (rel: string) => boolean;
}

/** Every entry under `dir`: kind, mode, digest (and mtime when asked). Equal snapshots, equal trees. */
export function snap(dir: string, opts: SnapOptions = {}): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(d).sort();
    } catch {
      return;
    }
    for (const name of names) {
      const abs = join(d, name);
      const key = `${rel}/${name}`;
      if (opts.skip?.(key)) continue;
      if (opts.skipTemps && isTemp(name)) continue;
      const st = lstatSync(abs);
      const mode = (st.mode & 0o7777).toString(8);
      const time = opts.mtimes ? ` ${st.mtimeMs}` : "";
      if (st.isSymbolicLink()) out.set(key, `link ${readlinkSync(abs)}`);
      else if (st.isDirectory()) {
        out.set(key, `dir ${mode}${time}`);
        walk(abs, key);
      } else out.set(key, `file ${mode} ${sha(readFileSync(abs))}${time}`);
    }
  };
  walk(dir, "");
  return out;
}

/** Temp files anywhere under `dir`, as paths relative to it. */
export function tempsUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const name of names) {
      const key = `${rel}/${name}`;
      if (isTemp(name)) out.push(key);
      // gone between the listing and the look (a lock a process let go): nothing under it to walk
      const st = lstatSync(join(d, name), { throwIfNoEntry: false });
      if (st?.isDirectory() && !st.isSymbolicLink()) walk(join(d, name), key);
    }
  };
  walk(dir, "");
  return out.sort();
}

/** The differences between two snapshots, one short line each. */
export function diffSnaps(want: Map<string, string>, got: Map<string, string>, limit = 8): string[] {
  const out: string[] = [];
  for (const [k, v] of want) {
    const g = got.get(k);
    if (g === undefined) out.push(`${k} missing (want ${short(v)})`);
    else if (g !== v) out.push(`${k} is ${short(g)}, want ${short(v)}`);
  }
  for (const [k, v] of got) if (!want.has(k)) out.push(`${k} unexpected (${short(v)})`);
  return out.length > limit ? [...out.slice(0, limit), `… ${out.length - limit} more differences`] : out;
}

function short(entry: string): string {
  return entry.replace(/([0-9a-f]{12})[0-9a-f]{52}/, "$1…");
}

// ---------------------------------------------------------------- random

export { rng } from "../support/random.ts";

export function seedFrom(env: string | undefined): number {
  const n = env === undefined ? Number.NaN : Number(env);
  return Number.isInteger(n) ? n >>> 0 : Math.floor(Math.random() * 2 ** 32);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- the CLI as a process

const bundles = new Map<string, Promise<string[]>>();

/**
 * `entry` bundled once per process into a temp dir (esbuild, the build's own options, CommonJS for this Node):
 * a chaos run starts hundreds of processes, and tsx's ~0.5 s start would be most of the time.
 */
export function bundled(entry: string): Promise<string[]> {
  let p = bundles.get(entry);
  if (!p) {
    p = (async () => {
      const dir = tempDir("mesh-chaos-bin-");
      const outfile = join(dir, "main.cjs");
      const opts = bundleOptions({ entry, outfile, version: "0.1.0", commit: "chaos" });
      try {
        await build({ ...opts, target: `node${process.versions.node.split(".")[0]}`, logLevel: "silent" });
        return [process.execPath, outfile];
      } catch (e) {
        // a tree mid-edit elsewhere (an import not written yet) still runs from the sources, only slower
        process.stderr.write(
          `chaos: cannot bundle ${entry} (${(e as Error).message.split("\n")[0]}); running it through tsx\n`,
        );
        return [
          process.execPath,
          "--import",
          pathToFileURL(join(REPO, "node_modules/tsx/dist/loader.mjs")).href,
          entry,
        ];
      }
    })();
    bundles.set(entry, p);
  }
  return p;
}

/** The argv prefix that runs mesh-host: MESH_HOST_BIN when it names an executable, else a fresh bundle of src/. */
export async function meshHostCommand(): Promise<string[]> {
  if (process.env.MESH_HOST_BIN) return [process.env.MESH_HOST_BIN];
  return await bundled(ENTRY);
}

/** A test-side entry (test/chaos/*-child.ts) as a node argv prefix. */
export async function childCommand(entry: string): Promise<string[]> {
  return await bundled(entry);
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface Running {
  child: ChildProcess;
  pid: number;
  started: number;
  exited: Promise<Exit>;
  /** What it has printed so far. */
  output(): { stdout: string; stderr: string };
  /** SIGKILL, now; resolves once the process is reaped. */
  kill(): Promise<Exit>;
}

export function start(
  argv: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number; input?: string } = {},
): Running {
  const [cmd, ...args] = argv;
  const started = performance.now();
  // a group of its own: a SIGKILL takes what it started with it (an action's child), as a crash under a
  // service manager does, and nothing of it outlives the scenario
  const child = spawnGroup(cmd!, args, {
    env: { ...process.env, MESH_LOG: "warn", ...opts.env },
    stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  // as runCli: a child that exits unread closes the pipe, and EPIPE is not the scenario's failure
  if (opts.input !== undefined) child.stdin!.on("error", () => {}).end(opts.input);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  const timer = setTimeout(() => killGroup(child.pid!), opts.timeoutMs ?? EVENT_WAIT_MS);
  const exited = new Promise<Exit>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      killGroup(child.pid!);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started });
    });
  });
  return {
    child,
    pid: child.pid!,
    started,
    exited,
    output: () => ({ stdout, stderr }),
    kill() {
      killGroup(child.pid!);
      return exited;
    },
  };
}

export async function meshHost(
  args: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number; input?: string } = {},
) {
  return start([...(await meshHostCommand()), ...args], opts);
}

/** Wait until `path` exists and (when given) holds `pid` as its first word; false after `timeoutMs`. */
export async function awaitLockBy(
  path: string,
  pid: number | null,
  timeoutMs = EVENT_WAIT_MS,
): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (existsSync(path)) {
      if (pid === null) return true;
      try {
        if (readFileSync(path, "utf8").split(" ")[0] === String(pid)) return true;
      } catch {
        // released between the two calls
      }
    }
    await sleep(1);
  }
  return false;
}

/** One line of the JSON document a `--json` run printed, or why it could not be read. */
export function jsonOf<T>(exit: Exit): { ok: true; doc: T } | { ok: false; reason: string } {
  try {
    return { ok: true, doc: JSON.parse(exit.stdout) as T };
  } catch {
    return {
      ok: false,
      reason: `exit ${exit.code}${exit.signal ? ` (${exit.signal})` : ""}, stdout not JSON: ${exit.stdout.slice(0, 120)} stderr: ${exit.stderr.trim().split("\n").slice(-2).join(" | ").slice(0, 300)}`,
    };
  }
}

export function describeExit(exit: Exit): string {
  return `exit ${exit.code}${exit.signal ? ` (${exit.signal})` : ""}: ${exit.stderr.trim().split("\n").slice(-2).join(" | ").slice(0, 300)}`;
}

// ---------------------------------------------------------------- secrets

/**
 * Which form of `value` `haystack` holds, or null: the text itself, its base64 or hex, or its bytes as a JSON
 * array of numbers (what JSON.stringify makes of a Buffer, pretty-printed or not).
 */
export function leakedForm(haystack: Uint8Array | string, value: string): string | null {
  const text = typeof haystack === "string" ? haystack : Buffer.from(haystack).toString("latin1");
  const bytes = Buffer.from(value);
  if (text.includes(typeof haystack === "string" ? value : bytes.toString("latin1"))) return "as text";
  if (text.includes(bytes.toString("base64").replace(/=+$/, ""))) return "as base64";
  if (text.includes(bytes.toString("hex"))) return "as hex";
  if (new RegExp(`\\b${[...bytes].join("\\s*,\\s*")}\\b`).test(text)) return "as a JSON array of its bytes";
  return null;
}
