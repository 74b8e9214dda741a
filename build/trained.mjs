// The executable's code cache, made after the bundle has run a `plan` (issue 22). Node's own SEA code cache
// (`useCodeCache`) is made from the bundle compiled and never run: it holds the top level only, so every function
// a command calls is compiled at its first call, in every process. A V8 cache made after a run holds the functions
// that run compiled (zod's parser, the vocabulary, the store, the file applier, the plan): the build runs a plan
// of a few files once, the executable's main is a small loader that compiles the bundle (an asset of the SEA)
// with that cache. Measured on `plan` of 10 files: ×0.74 the time of the untrained cache, peak RSS the same;
// compiling every function eagerly instead was ×0.95 the CPU for 20 MB more. Made with BLOB_MAKER_FLAGS
// (`--predictable`), the cache is the same bytes from one build to the next (test/build/build.test.ts).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BLOB_MAKER_FLAGS, SEA_EXEC_ARGV } from "./tools.mjs";

/** The SEA's assets: the bundle's text and the cache made from it. */
export const BUNDLE_ASSET = "bundle";
export const CACHE_ASSET = "code-cache";
export const LOADER = "loader.cjs";
export const CACHE_FILE = "code-cache.bin";
/** The name the bundle's code has in a stack trace, as it had as the SEA's main. */
const FILENAME = "mesh-host.cjs";

// The bundle compiled as one CommonJS function, the same text when trained and when run (V8 takes a cache only
// for the source it was made from).
const HEAD = "(function (exports, require, module, __filename, __dirname) {";
const TAIL = "\n})";

/**
 * The SEA's main: the bundle from its asset (ASCII, so read as Latin-1: one byte a character), compiled with the
 * trained cache, run with the SEA's `require` (built-in modules only, as before). A cache V8 refuses (another
 * runtime) only costs the compile it would have saved.
 */
export function loaderText() {
  return `"use strict";
const sea = require("node:sea");
const { Script } = require("node:vm");
const text = Buffer.from(sea.getRawAsset(${JSON.stringify(BUNDLE_ASSET)})).toString("latin1");
const script = new Script(${JSON.stringify(HEAD)} + text + ${JSON.stringify(TAIL)}, {
  filename: ${JSON.stringify(FILENAME)},
  cachedData: Buffer.from(sea.getRawAsset(${JSON.stringify(CACHE_ASSET)})),
});
const mod = { exports: {} };
script.runInThisContext()(mod.exports, require, mod, ${JSON.stringify(FILENAME)}, ".");
`;
}

/** The trainer: the same compile, a run of the bundle with `args`, and the cache written at its exit. */
function trainerText(bundle, out, args) {
  return `"use strict";
const { readFileSync, writeFileSync } = require("node:fs");
const { Script } = require("node:vm");
const text = readFileSync(${JSON.stringify(bundle)}, "latin1");
const script = new Script(${JSON.stringify(HEAD)} + text + ${JSON.stringify(TAIL)}, { filename: ${JSON.stringify(FILENAME)} });
process.on("exit", () => writeFileSync(${JSON.stringify(out)}, script.createCachedData()));
process.argv = [process.argv[0], ${JSON.stringify(FILENAME)}, ...${JSON.stringify(args)}];
const mod = { exports: {} };
script.runInThisContext()(mod.exports, require, mod, ${JSON.stringify(FILENAME)}, ".");
`;
}

/** What the cache is trained on: a plan of files under a fresh root, on the Arch host (the same on any builder). */
const TRAINING_FILES = 10;
function trainingDeclaration() {
  return {
    v: 1,
    node: "build",
    mode: "converged",
    resources: Array.from({ length: TRAINING_FILES }, (_, i) => ({
      id: `f${i}`,
      type: "file",
      path: `/etc/mesh-build/f${i}.conf`,
      content: `file ${i}\n`,
      mode: "0644",
    })),
  };
}

/** Run a plan under `runtime` and return the V8 cache it leaves; written to `work`/CACHE_FILE as well. */
export function trainCodeCache(run, runtime, work, bundle) {
  const dir = mkdtempSync(join(tmpdir(), "mesh-build-train-"));
  try {
    const decl = join(dir, "declaration.json");
    writeFileSync(decl, JSON.stringify(trainingDeclaration()));
    const args = ["plan", decl, "--root", dir, "--state", join(dir, "state"), "--host", "arch"];
    const out = join(work, CACHE_FILE);
    const trainer = join(dir, "trainer.cjs");
    writeFileSync(trainer, trainerText(bundle, out, args));
    const env = { PATH: "/usr/bin:/bin" };
    run([runtime, ...BLOB_MAKER_FLAGS, ...SEA_EXEC_ARGV, trainer], { cwd: dir, env });
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
