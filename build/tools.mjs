// What both builds (the Linux SEA and the Android one) need: one-line output, timing, hashing, commands that
// must succeed, one build at a time per output directory, and the SEA steps themselves — the config, the stamp
// that skips an unchanged build, the blob, the injection.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, join } from "node:path";
import { progress } from "./progress.mjs";

const require = createRequire(import.meta.url);

export const LOCK_WAIT_MS = 10 * 60 * 1000;
export const SENTINEL_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

/** `say` to stdout; `fail` (exit 1, a step failed) and `refuse` (exit 2, bad input) to stderr; all one line, prefixed. */
/**
 * `say` a result (stdout), `step` where the build is (stderr: an updating line on a terminal, a plain line off
 * one: build/progress.mjs), `fail` and `refuse` with one line, the progress line cleared first.
 */
export function reporter(prefix) {
  const p = progress(prefix);
  const out = (stream, message) => p.say(message, stream);
  return {
    say: (message) => out(process.stdout, message),
    step: (message) => p.step(message),
    fail: (message) => {
      out(process.stderr, message);
      process.exit(1);
    },
    refuse: (message) => {
      out(process.stderr, message);
      process.exit(2);
    },
  };
}

export const since = (t) => `${Math.round(performance.now() - t)} ms`;
export const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
export const sha256 = (data) => createHash("sha256").update(data).digest("hex");

export function gitCommit(root) {
  const r = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" });
  return r.status === 0 && r.stdout.trim() ? r.stdout.trim() : "unknown";
}

/** A command that must succeed: its stdout, or `fail` with what it said. */
export function runner(fail) {
  return (argv, opts = {}) => {
    const r = spawnSync(argv[0], argv.slice(1), { encoding: "utf8", ...opts });
    if (r.error) fail(`${argv[0]}: ${r.error.message}`);
    if (r.status !== 0) fail(`${argv.join(" ")} exited ${r.status ?? r.signal}:\n${r.stderr}${r.stdout}`);
    return r.stdout;
  };
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

/**
 * One build at a time in `work`: test files run in parallel and each may ask for the executable. The lock
 * holds the builder's pid; a lock whose process is gone is taken over.
 */
export function buildLock(work, { say, fail, name }) {
  const file = join(work, "lock");
  const deadline = Date.now() + LOCK_WAIT_MS;
  let said = false;
  for (;;) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx" });
      process.on("exit", () => rmSync(file, { force: true }));
      return;
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
    }
    const holder = Number.parseInt(readFileSync(file, "utf8"), 10);
    if (holder > 0 && !alive(holder)) {
      rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > deadline) fail(`${name(file)} is held by pid ${holder} for too long`);
    if (!said) say(`waiting for the build in pid ${holder}`);
    said = true;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  }
}

/**
 * The runtime's flags, baked into the executable (the only ones it takes: execArgvExtension is "none"). A young
 * generation of 2 MB instead of V8's default 16: an apply allocates in short bursts that a small nursery
 * collects cheaply, and the host idles for days, so a large one only holds garbage as RSS. Measured on a no-op
 * of 1,000 files by the executable: peak RSS 112 → 100 MB, and no slower (216 → 189 ms, medians of 11).
 */
export const SEA_EXEC_ARGV = ["--max-semi-space-size=2"];

/**
 * The SEA config both builds write into `work`. `useCodeCache` only when the blob maker is the runtime that
 * will run it: a code cache is specific to the V8 and CPU that compiled it (Node's SEA docs: cross-platform
 * blobs need useCodeCache and useSnapshot false). Made with BLOB_MAKER_FLAGS, the cache is byte-identical
 * between builds.
 */
export function writeSeaConfig(work, main, useCodeCache, assets) {
  const config = {
    main: basename(main),
    output: "sea-prep.blob",
    disableExperimentalSEAWarning: true,
    useCodeCache,
    // Measured 2026-12-03 (packaging.md): a startup snapshot starts `version` in 0.6 of the CPU of this bundle
    // loaded whole, but raises peak RSS by 7-21 MB (the snapshot is read into memory beside the runtime's own),
    // and its bytes differ between builds (heap addresses). Loading each command's code only when it runs
    // (src/cli/cli.ts) starts `version` faster still with 12 MB less: no snapshot.
    useSnapshot: false,
    // NODE_OPTIONS and friends never reach the runtime, so they cannot --require code into the host
    execArgvExtension: "none",
    execArgv: SEA_EXEC_ARGV,
    // the bundle and its trained code cache, when `main` is the loader that runs them (build/trained.mjs)
    ...(assets ? { assets } : {}),
  };
  writeFileSync(join(work, "sea-config.json"), `${JSON.stringify(config, null, 2)}\n`);
  return config;
}

/**
 * The stamp of everything a build makes `output` from: when it matches and the output is there, the expensive
 * steps are skipped. A stale stamp is removed before a rebuild, so a build that fails half way is never trusted.
 */
export function buildStamp(work, output, parts, force) {
  const file = join(work, "stamp.json");
  const stamp = sha256(JSON.stringify(parts));
  const fresh =
    !force && existsSync(output) && existsSync(file) && readFileSync(file, "utf8").trim() === stamp;
  if (!fresh) rmSync(file, { force: true });
  return { fresh, save: () => writeFileSync(file, `${stamp}\n`) };
}

/**
 * V8 flags of the blob maker. `--predictable` makes V8's code cache the same from one build to the next (without
 * it ~150,000 bytes of a 1.3 MB blob differ between two runs), so two builds of one commit give one executable;
 * the runtime still takes that cache (it starts as fast as with one made without the flag).
 */
export const BLOB_MAKER_FLAGS = ["--predictable"];

/** The blob, made in `work` by `maker` from sea-config.json, with nothing from the environment steering it. */
export function makeBlob(run, maker, work, config) {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  run([maker, ...BLOB_MAKER_FLAGS, "--experimental-sea-config", "sea-config.json"], { cwd: work, env });
  return readFileSync(join(work, config.output));
}

/** postject puts the blob into the runtime copy `temp` and flips the SEA fuse; `temp` then becomes `output`. */
export async function injectBlob(temp, output, blob, say) {
  const t = performance.now();
  const { inject } = require("postject");
  // LIEF (inside postject) warns about section names it cannot resolve in Node's binary: harmless, so counted.
  const warn = console.warn;
  let sectionNameWarnings = 0;
  console.warn = (...args) => {
    if (/Can't find string offset for section name/.test(args.join(" "))) sectionNameWarnings++;
    else warn(...args);
  };
  try {
    await inject(temp, "NODE_SEA_BLOB", blob, { sentinelFuse: SENTINEL_FUSE });
  } finally {
    console.warn = warn;
  }
  chmodSync(temp, 0o755);
  renameSync(temp, output);
  say(
    `injected in ${since(t)}${sectionNameWarnings ? ` (${sectionNameWarnings} section-name warnings from LIEF, harmless)` : ""}`,
  );
}
