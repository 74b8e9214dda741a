#!/usr/bin/env node
// `npm run build:android -- --runtime PATH [flags]`: the Android executable and its init service,
//   dist/android/mesh-host-<version>-android-<arch> and dist/android/mesh-host.rc.
//
// 1. esbuild bundles src/cli/main-android.ts, the Android executable's composition root, as the Linux build
//    bundles its own: that root hands the commands the portable floor only, so nothing of the Arch host is
//    reached. The build fails if the metafile still lists an Arch module, or anything external but Node's
//    built-ins.
// 2. The SEA blob is made by a Node runtime running here (`<node> --experimental-sea-config`). Node ties a blob
//    to the version that made it, so the blob maker must be the Android runtime's version. The Android runtime
//    makes its own blob when it can run on this machine (a stand-in, or a build on the device); otherwise
//    --blob-runtime names a Node of the same version that runs here, and the blob goes without V8's code cache
//    (a code cache is specific to the platform that compiled it: Node's docs say cross-platform blobs need
//    useCodeCache and useSnapshot false). The code cache saves ~7 ms of start-up, nothing else.
// 3. postject injects the blob into a copy of the Android runtime and flips the SEA fuse. The runtime is not
//    stripped here (its strip is the NDK's; stripping after injection breaks a SEA).
// 4. mesh-host.rc is written from android/rc.mjs.
//
// The npm registry ships no Android Node runtime: without --runtime (or MESH_ANDROID_RUNTIME) the build stops,
// saying what to give it (exit 2). Any Node binary runs the whole pipeline: the tests use the pinned Linux
// runtime as a stand-in, and the build says when a runtime is not Android's (its ELF interpreter is not
// /system/bin/linker*).
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
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { foreignExternals } from "../build/bundle.mjs";
import {
  buildLock,
  buildStamp,
  gitCommit,
  injectBlob,
  makeBlob,
  mib,
  reporter,
  runner,
  SENTINEL_FUSE,
  sha256,
  since,
  writeSeaConfig,
} from "../build/tools.mjs";
import { androidBundleOptions, archModulesIn, ROOT } from "./bundle.mjs";
import { elfOf } from "./elf.mjs";
import { RC_DEFAULTS, rcProblem, rcText } from "./rc.mjs";
import { fileContextsText, teText } from "./sepolicy.mjs";

/** Bump when this script changes what it makes from the same inputs, so an old stamp is not trusted. */
const RECIPE = "android-sea-1";
const USAGE =
  "flags: --runtime PATH  --blob-runtime PATH  --out DIR  --user NAME  --group NAME  --start class|boot-completed  --launcher  --seclabel CONTEXT  --force";

const started = performance.now();
const require = createRequire(import.meta.url);

const { say, fail, refuse } = reporter("build:android");
const run = runner(fail);
const rel = (p) => relative(ROOT, p) || ".";

function parseFlags(argv, env) {
  const flags = {
    runtime: env.MESH_ANDROID_RUNTIME || null,
    blobRuntime: env.MESH_ANDROID_BLOB_RUNTIME || null,
    out: join(ROOT, "dist", "android"),
    user: RC_DEFAULTS.user,
    group: RC_DEFAULTS.group,
    start: RC_DEFAULTS.start,
    launcher: false,
    seclabel: null,
    force: false,
  };
  const valued = {
    "--runtime": "runtime",
    "--blob-runtime": "blobRuntime",
    "--out": "out",
    "--user": "user",
    "--group": "group",
    "--start": "start",
    "--seclabel": "seclabel",
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf("=");
    const name = eq > 0 ? a.slice(0, eq) : a;
    if (a === "--force") flags.force = true;
    else if (a === "--launcher") flags.launcher = true;
    else if (valued[name]) {
      const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
      if (value === undefined || value === "") refuse(`${name} needs a value (${USAGE})`);
      flags[valued[name]] = value;
    } else refuse(`unknown flag "${a}" (${USAGE})`);
  }
  return flags;
}

/** `node --version` of a binary that runs here, or null when it cannot run on this machine. */
function runsHere(file) {
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const r = spawnSync(file, ["--version"], { encoding: "utf8", env, timeout: 30_000 });
  if (r.error || r.status !== 0) return null;
  const v = r.stdout.trim();
  return /^v\d+\.\d+\.\d+/.test(v) ? v : null;
}

/** The Node version a binary carries in its text (the inspector's `node.js/vX` or the release URL), or null. */
function versionInside(bytes) {
  const text = bytes.toString("latin1");
  const m =
    /node\.js\/(v\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)\0/.exec(text) ??
    /download\/release\/(v\d+\.\d+\.\d+)\//.exec(text);
  return m ? m[1] : null;
}

/** The Android runtime as given: a readable ELF with the SEA fuse. Its arch names the output. */
function checkRuntime(path) {
  const file = resolve(path);
  let st;
  try {
    st = statSync(file);
  } catch (e) {
    refuse(`--runtime ${path}: ${e.code === "ENOENT" ? "no such file" : e.code}`);
  }
  if (!st.isFile()) refuse(`--runtime ${path} is not a file`);
  const elf = elfOf(file);
  if (!elf) refuse(`--runtime ${path} is not an ELF executable: give a Node binary built for Android`);
  if (!elf.arch) refuse(`--runtime ${path} is for ELF machine ${elf.machine}, which no Android Node runs on`);
  const bytes = readFileSync(file);
  if (!bytes.includes(SENTINEL_FUSE))
    refuse(
      `--runtime ${path} has no single-executable fuse: give a Node build with SEA support (Node 20 or later)`,
    );
  const interpreter = elf.interpreter?.path ?? null;
  // Bionic's dynamic linker; a static runtime has none (and is not a glibc one either: it could be Android's)
  const android = interpreter === null || /^\/system\/bin\/linker(64)?$/.test(interpreter);
  return {
    file,
    size: st.size,
    mtimeMs: st.mtimeMs,
    arch: elf.arch,
    interpreter,
    android,
    inside: versionInside(bytes),
  };
}

/**
 * Who makes the blob, and its version. The Android runtime itself when it runs here; else --blob-runtime,
 * which must run here and be the same version.
 */
function blobMaker(runtime, blobRuntimePath) {
  const own = runsHere(runtime.file);
  const version = own ?? runtime.inside;
  if (!blobRuntimePath) {
    if (own) return { file: runtime.file, version: own, own: true };
    refuse(
      `the Android runtime cannot run on this machine to make the SEA blob: give --blob-runtime PATH (or MESH_ANDROID_BLOB_RUNTIME), a Node ${version ?? "of the same version"} that runs here`,
    );
  }
  const file = resolve(blobRuntimePath);
  const blobVersion = existsSync(file) ? runsHere(file) : null;
  if (!blobVersion) refuse(`--blob-runtime ${blobRuntimePath} does not run here as node --version`);
  if (version && version !== blobVersion)
    refuse(
      `--blob-runtime ${blobRuntimePath} is node ${blobVersion}, the Android runtime is ${version}: Node ties a blob to the version that made it`,
    );
  if (!version)
    say(`could not read the Android runtime's version: trusting the blob runtime's ${blobVersion} to match`);
  return { file, version: blobVersion, own: file === runtime.file };
}

/** The launcher as init execs it on a device: Android has no /bin/sh, its shell is /system/bin/sh. */
function androidLauncher() {
  const text = readFileSync(join(ROOT, "pkgbuild/launch"), "utf8");
  if (!text.startsWith("#!/bin/sh\n")) fail("pkgbuild/launch no longer starts with #!/bin/sh");
  return `#!/system/bin/sh\n${text.slice("#!/bin/sh\n".length)}`;
}

async function bundle(work, version, commit) {
  const esbuild = require("esbuild");
  const t = performance.now();
  const outfile = join(work, "mesh-host.cjs");
  const result = await esbuild.build(androidBundleOptions({ outfile, version, commit }));
  const meta = join(work, "meta.json");
  writeFileSync(meta, JSON.stringify(result.metafile));
  const foreign = foreignExternals(result.metafile);
  if (foreign.length)
    fail(
      `the bundle leaves ${foreign.join(", ")} external: a SEA can require only built-in modules (${rel(meta)})`,
    );
  const arch = archModulesIn(result.metafile);
  if (arch.length) fail(`the Android bundle still carries ${arch.join(", ")} (${rel(meta)})`);
  say(`bundle ${rel(outfile)} ${mib(statSync(outfile).size)} in ${since(t)}: the floor only`);
  return outfile;
}

function lock(work) {
  buildLock(work, { say, fail, name: rel });
}

function writeAtomic(file, text, mode = 0o644) {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, text, { mode });
  chmodSync(temp, mode);
  renameSync(temp, file);
}

async function main() {
  const flags = parseFlags(process.argv.slice(2), process.env);
  if (!flags.runtime)
    refuse(
      "no Android Node runtime: give its path with --runtime PATH or MESH_ANDROID_RUNTIME (the npm registry ships none; build one from Node's sources with its android-configure)",
    );
  const rcOptions = {
    user: flags.user,
    group: flags.group,
    start: flags.start,
    launcher: flags.launcher ? "/system/bin/mesh-host-launch" : null,
    seclabel: flags.seclabel,
  };
  const rcWrong = rcProblem({ ...RC_DEFAULTS, ...rcOptions });
  if (rcWrong) refuse(rcWrong);

  const runtime = checkRuntime(flags.runtime);
  const maker = blobMaker(runtime, flags.blobRuntime);
  say(
    `runtime ${flags.runtime}: ${runtime.arch}, ${maker.version ?? runtime.inside ?? "version unknown"}, ${mib(runtime.size)}${runtime.android ? "" : ` (not an Android binary: its interpreter is ${runtime.interpreter}; built anyway, as a stand-in)`}`,
  );

  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const { version } = pkg;
  const commit = gitCommit(ROOT);
  const out = isAbsolute(flags.out) ? flags.out : resolve(flags.out);
  const work = join(out, ".build", runtime.arch);
  mkdirSync(work, { recursive: true });
  lock(work);
  const name = `mesh-host-${version}-android-${runtime.arch}`;
  const output = join(out, name);

  const main = await bundle(work, version, commit);
  // only a blob made by the runtime that runs it may carry V8's code cache (see the top of this file)
  const seaConfig = writeSeaConfig(work, main, maker.own);
  const stamp = buildStamp(
    work,
    output,
    {
      recipe: RECIPE,
      script: sha256(readFileSync(fileURLToPath(import.meta.url))),
      bundle: sha256(readFileSync(main)),
      seaConfig,
      runtime: { file: runtime.file, size: runtime.size, mtimeMs: runtime.mtimeMs },
      maker: maker.file,
    },
    flags.force,
  );

  if (stamp.fresh) say(`${rel(output)} is up to date (same bundle, config and runtime; --force rebuilds)`);
  else {
    const t = performance.now();
    const blob = makeBlob(run, maker.file, work, seaConfig);
    say(
      `blob ${mib(blob.length)} by node ${maker.version}${maker.own ? " (the runtime itself, with its code cache)" : ` (${maker.file}, without a code cache)`} in ${since(t)}`,
    );
    const temp = join(out, `.${name}.${process.pid}.tmp`);
    process.on("exit", () => rmSync(temp, { force: true }));
    copyFileSync(runtime.file, temp);
    chmodSync(temp, 0o755);
    await injectBlob(temp, output, blob, say);
    stamp.save();
  }

  const rcFile = join(out, "mesh-host.rc");
  writeAtomic(rcFile, rcText(rcOptions));
  say(
    `${rel(rcFile)}: user ${flags.user}, group ${flags.group} inet, started by ${flags.start === "class" ? "class late_start" : "sys.boot_completed=1"}${flags.launcher ? ", through the launcher" : ""}`,
  );
  const policy = join(out, "sepolicy");
  mkdirSync(policy, { recursive: true });
  const rcFull = { ...RC_DEFAULTS, ...rcOptions };
  writeAtomic(join(policy, "mesh_host.te"), teText(rcFull));
  writeAtomic(join(policy, "file_contexts"), fileContextsText(rcFull));
  say(`${rel(policy)}/: mesh_host.te and file_contexts, the SELinux fragment an enforcing image needs`);
  if (flags.launcher) {
    const launcher = join(out, "mesh-host-launch");
    writeAtomic(launcher, androidLauncher(), 0o755);
    say(`${rel(launcher)}: the rollback launcher (POSIX sh; Android's mksh runs it)`);
  }

  // The proof a build worked is running it, where it can run.
  if (runsHere(runtime.file)) {
    const t = performance.now();
    const r = spawnSync(output, ["version", "--json", "--host", "android"], {
      encoding: "utf8",
      env: { PATH: "/usr/bin:/bin" },
    });
    if (r.status !== 0) fail(`${name} version exited ${r.status ?? r.signal}: ${r.stderr}`);
    say(`runs: ${JSON.stringify(JSON.parse(r.stdout))} (${since(t)})`);
  } else say(`${name} is for ${runtime.arch} Android: not run on this machine`);
  say(
    `${rel(output)} ${mib(statSync(output).size)}, ${((performance.now() - started) / 1000).toFixed(1)} s in all`,
  );
}

main().catch((e) => fail(e?.stack ?? String(e)));
