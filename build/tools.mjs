// What both builds (the Linux SEA and the Android one) need: one-line output, timing, hashing, commands that
// must succeed, and one build at a time per output directory.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const LOCK_WAIT_MS = 10 * 60 * 1000;
export const SENTINEL_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

/** `say` to stdout; `fail` (exit 1, a step failed) and `refuse` (exit 2, bad input) to stderr; all one line, prefixed. */
export function reporter(prefix) {
  const out = (stream, message) => stream.write(`${prefix}: ${message}\n`);
  return {
    say: (message) => out(process.stdout, message),
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
