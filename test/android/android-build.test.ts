// The Android host's detection, its bundle (proved from esbuild's metafile to carry only the floor's appliers),
// and `npm run build:android`. No Android runtime is at hand (the npm registry ships none), so the whole
// pipeline runs with the pinned Linux runtime standing in for one, and a copy of it whose ELF interpreter says
// /system/bin/linker64 stands in for one that cannot run on this machine.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  openSync,
  readFileSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";
import { androidBundleOptions, archModulesIn } from "../../android/bundle.mjs";
import { elfOf } from "../../android/elf.mjs";
import { RC_DEFAULTS, rcText } from "../../android/rc.mjs";
import { fileContextsText, teText } from "../../android/sepolicy.mjs";
import { bundleOptions, ENTRY, ROOT } from "../../build/bundle.mjs";
import { detectHostKind } from "../../src/host-kind.ts";
import { runCli } from "../support/cli.ts";
import { PACKAGE, PINNED_NODE, PINNED_RUNTIME } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

const BUILD = join(ROOT, "android/build.mjs");
const DIST = join(ROOT, "dist/android");
const ANDROID_SEA = join(DIST, `mesh-host-${PACKAGE.version}-android-x64`);
const BUILD_MS = 5 * 60 * 1000;
/** What the brief names: none of it may be in the Android bundle (the vocabulary's schemas are not appliers). */
const ARCH_WORDS = /service|package|process|container|overlay|systemd|pacman|runtime|wireguard/;
/** Arguments only the Arch appliers pass: systemctl's, pacman's, wg's, a container runtime's. */
const ARCH_MARKERS = ['"daemon-reload"', '"--noconfirm"', '"wg"', '"inspect"'];

/** `node android/build.mjs ARGS` with nothing of the caller's Android settings. */
function buildAndroid(args: string[], env: Record<string, string> = {}) {
  const base = { ...process.env };
  for (const k of ["NODE_OPTIONS", "MESH_ANDROID_RUNTIME", "MESH_ANDROID_BLOB_RUNTIME"]) delete base[k];
  return spawnSync(process.execPath, [BUILD, ...args], {
    cwd: ROOT,
    env: { ...base, ...env },
    encoding: "utf8",
    timeout: BUILD_MS,
  });
}

function executable(path: string, text: string) {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
}

/** A copy of a dynamically linked ELF whose interpreter is `path` instead (written over the old one in place). */
function withInterpreter(src: string, dest: string, path: string) {
  copyFileSync(src, dest);
  const interp = elfOf(dest)?.interpreter;
  if (!interp || path.length >= interp.size) throw new Error(`${src}: no room for ${path}`);
  const bytes = Buffer.alloc(interp.size);
  bytes.write(path, "latin1");
  const fd = openSync(dest, "r+");
  try {
    writeSync(fd, bytes, 0, bytes.length, interp.offset);
  } finally {
    closeSync(fd);
  }
  chmodSync(dest, 0o755);
  return dest;
}

describe("detecting the Android host", () => {
  const none = join(ROOT, "no/such/file");

  it("by ANDROID_ROOT, by /system/build.prop, or by a getprop on PATH that answers ro.build.version.sdk", () => {
    const dir = tempDir();
    const buildProp = join(dir, "build.prop");
    writeFileSync(buildProp, "ro.build.version.sdk=34\n");
    const arch = join(dir, "os-release");
    writeFileSync(arch, "NAME=Arch Linux\nID=arch\n");
    const plain = { PATH: "/usr/bin:/bin" };
    expect(detectHostKind({ ...plain, ANDROID_ROOT: "/system" }, arch, none)).toBe("android");
    expect(detectHostKind(plain, arch, buildProp)).toBe("android");
    expect(detectHostKind(plain, arch, none)).toBe("arch");
    expect(detectHostKind(plain, none, none)).toBe("linux");

    const bin = join(dir, "bin");
    const spawned = join(dir, "spawned");
    const getprop = (answer: string, code = 0) =>
      executable(
        join(bin, "getprop"),
        `#!/bin/sh\necho "$@" >> '${spawned}'\n[ "$1" = ro.build.version.sdk ] && printf '%s\\n' '${answer}'\nexit ${code}\n`,
      );
    spawnSync("mkdir", [bin]);
    getprop("34");
    expect(detectHostKind({ PATH: `${bin}:/usr/bin:/bin` }, arch, none)).toBe("android");
    expect(readFileSync(spawned, "utf8")).toBe("ro.build.version.sdk\n");
    // a getprop that is not Android's (no API level, or failing) is not a mark
    getprop("");
    expect(detectHostKind({ PATH: `${bin}:/usr/bin:/bin` }, arch, none)).toBe("arch");
    getprop("unknown");
    expect(detectHostKind({ PATH: `${bin}:/usr/bin:/bin` }, none, none)).toBe("linux");
    getprop("34", 1);
    expect(detectHostKind({ PATH: `${bin}:/usr/bin:/bin` }, none, none)).toBe("linux");
    // the cheap marks first: with ANDROID_ROOT set, getprop is never asked
    writeFileSync(spawned, "");
    expect(detectHostKind({ PATH: `${bin}:/usr/bin:/bin`, ANDROID_ROOT: "/system" }, none, none)).toBe(
      "android",
    );
    expect(readFileSync(spawned, "utf8")).toBe("");
  });

  it("--host android forces it, and its state defaults to /data/mesh-host (--state still wins)", async () => {
    const forced = await runCli(["status", "--json", "--host", "android"]);
    // no /data/mesh-host on this machine: status says so (exit 1), naming the state it looked in
    expect(forced.code, forced.stderr).toBe(1);
    expect(JSON.parse(forced.stdout)).toMatchObject({
      host: "android",
      state: "/data/mesh-host",
      problems: [expect.stringContaining("no state at /data/mesh-host")],
    });
    const state = join(tempDir(), "state");
    const given = await runCli(["status", "--json", "--host", "android", "--state", state]);
    expect(JSON.parse(given.stdout)).toMatchObject({ host: "android", state });
    const marked = await runCli(["version", "--json"], { env: { ANDROID_ROOT: "/system" } });
    expect(JSON.parse(marked.stdout)).toMatchObject({ host: "android" });
    const linux = await runCli(["version", "--json", "--host", "linux"], {
      env: { ANDROID_ROOT: "/system" },
    });
    expect(JSON.parse(linux.stdout)).toMatchObject({ host: "linux" });
  });
});

describe("the Android bundle", () => {
  const inputsOf = (metafile: import("esbuild").Metafile) =>
    Object.keys(metafile.inputs)
      .filter((k) => !k.includes(":"))
      .map((k) => relative(ROOT, resolve(k)));

  it("lists no service, package, process, container, overlay, systemd, pacman, runtime or wireguard module in its metafile", async () => {
    const dir = tempDir();
    const result = await build({
      ...androidBundleOptions({ outfile: join(dir, "android.cjs"), version: "0", commit: "x" }),
      write: false,
    });
    const inputs = inputsOf(result.metafile);
    expect(archModulesIn(result.metafile)).toEqual([]);
    // the vocabulary's schemas and the store's state files (store/overlay.ts: the overlay's key and ledger, which
    // the store knows on every host) are no driver: a module of the Arch host is any other so named
    const named = inputs.filter(
      (p) =>
        p.startsWith("src/") &&
        !p.startsWith("src/vocabulary/") &&
        !p.startsWith("src/store/") &&
        ARCH_WORDS.test(basename(p)),
    );
    expect(named).toEqual([]);
    expect(inputs).not.toContain("src/cli/main.ts");
    expect(inputs).toEqual(
      expect.arrayContaining([
        "src/cli/main-android.ts",
        "src/hosts/index.ts",
        "src/appliers/portable/file.ts",
        "src/appliers/portable/directory.ts",
        "src/appliers/portable/action.ts",
      ]),
    );
    // composed, not swapped: nothing stands in for a module of the Arch host
    expect(
      Object.keys(result.metafile.inputs).filter((k) => k.includes(":") && !k.startsWith("<define:")),
    ).toEqual([]);
    const code = result.outputFiles![0]!.text;
    for (const marker of ARCH_MARKERS) expect(code.includes(marker), marker).toBe(false);
  });

  it("the check is not vacuous: the Linux bundle of the same sources carries the Arch host's modules", async () => {
    const dir = tempDir();
    const result = await build({
      ...bundleOptions({ entry: ENTRY, outfile: join(dir, "linux.cjs"), version: "0", commit: "x" }),
      write: false,
    });
    expect(archModulesIn(result.metafile)).toEqual(
      expect.arrayContaining([
        "src/cli/main.ts",
        "src/appliers/arch/service.ts",
        "src/appliers/arch/package.ts",
        "src/appliers/arch/process.ts",
        "src/system/arch/systemd.ts",
        "src/system/arch/pacman.ts",
        // the operator's half: a phone is a node, never a mesh's controller
        "src/mesh/index.ts",
        "src/cli/mesh/main.ts",
      ]),
    );
    const code = result.outputFiles![0]!.text;
    // systemd's and pacman's (the container and WireGuard appliers are younger: their words may move)
    for (const marker of ARCH_MARKERS.slice(0, 2)) expect(code.includes(marker), marker).toBe(true);
  });
});

describe("npm run build:android", () => {
  it("without a runtime stops with one line saying what to give it, exit 2, and writes nothing", () => {
    const out = join(tempDir(), "out");
    const r = buildAndroid(["--out", out]);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/--runtime PATH or MESH_ANDROID_RUNTIME/);
    expect(r.stderr).toMatch(/npm registry ships none/);
    expect(existsSync(out)).toBe(false);
  });

  it("refuses, in one line, a runtime that is not an executable or has no SEA fuse, and a bad rc option", () => {
    const dir = tempDir();
    const text = join(dir, "node");
    writeFileSync(text, "not a binary\n");
    const cases: [string[], Record<string, string>, RegExp][] = [
      [["--out", dir], { MESH_ANDROID_RUNTIME: text }, /is not an ELF executable/],
      [["--runtime", join(dir, "missing"), "--out", dir], {}, /no such file/],
      [["--runtime", "/bin/true", "--out", dir], {}, /has no single-executable fuse/],
      [["--runtime", PINNED_RUNTIME, "--user", "root", "--out", dir], {}, /--user must not be root/],
      [["--runtime", PINNED_RUNTIME, "--seclabel", "su", "--out", dir], {}, /--seclabel must be a context/],
      [["--runtime", PINNED_RUNTIME, "--frobnicate"], {}, /unknown flag "--frobnicate"/],
    ];
    for (const [args, env, line] of cases) {
      const r = buildAndroid(args, env);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(r.stderr).toMatch(line);
    }
  });

  it(
    "with --runtime pointing at any Node (the pinned Linux runtime stands in for Android's) makes the executable and mesh-host.rc",
    () => {
      const r = buildAndroid(["--runtime", PINNED_RUNTIME]);
      expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(
        /not an Android binary: its interpreter is \/lib64\/ld-linux-x86-64\.so\.2; built anyway, as a stand-in/,
      );
      expect(statSync(ANDROID_SEA).mode & 0o111).not.toBe(0);
      expect(readFileSync(join(DIST, "mesh-host.rc"), "utf8")).toBe(rcText());
      // the SELinux fragment beside it, for the same options
      expect(readFileSync(join(DIST, "sepolicy/mesh_host.te"), "utf8")).toBe(teText(RC_DEFAULTS));
      expect(readFileSync(join(DIST, "sepolicy/file_contexts"), "utf8")).toBe(fileContextsText(RC_DEFAULTS));
      // the metafile of the bundle inside it, as the build kept it
      const meta = JSON.parse(readFileSync(join(DIST, ".build/x64/meta.json"), "utf8"));
      expect(archModulesIn(meta)).toEqual([]);
      const sea = JSON.parse(readFileSync(join(DIST, ".build/x64/sea-config.json"), "utf8"));
      expect(sea).toMatchObject({
        useCodeCache: true,
        useSnapshot: false,
        execArgvExtension: "none",
        execArgv: ["--max-semi-space-size=2"],
      });

      const v = spawnSync(ANDROID_SEA, ["version", "--json", "--host", "android"], { encoding: "utf8" });
      expect(v.status, v.stderr).toBe(0);
      expect(JSON.parse(v.stdout)).toMatchObject({
        version: PACKAGE.version,
        node: PINNED_NODE,
        host: "android",
      });
      // the Arch host's appliers are not in it: even told it is on Arch, it has no service applier
      const dir = tempDir();
      const decl = join(dir, "d.json");
      writeFileSync(
        decl,
        JSON.stringify({
          v: 1,
          node: "n",
          mode: "converged",
          resources: [{ id: "s", type: "service", unit: "x.service" }],
        }),
      );
      const plan = spawnSync(
        ANDROID_SEA,
        ["plan", decl, "--host", "arch", "--root", dir, "--state", join(dir, "s")],
        {
          encoding: "utf8",
        },
      );
      expect(plan.status).toBe(2);
      expect(plan.stderr).toMatch(/type "service": not implemented on the Arch host/);

      // a second build with nothing changed reuses the executable
      const again = buildAndroid(["--runtime", PINNED_RUNTIME]);
      expect(again.status).toBe(0);
      expect(again.stdout).toMatch(/is up to date/);
    },
    BUILD_MS,
  );

  it(
    "for a runtime that cannot run here, takes the blob from --blob-runtime of the same version, without a code cache",
    () => {
      const dir = tempDir();
      // the pinned runtime, its interpreter made Bionic's: it cannot start on this machine, as Android's would not
      const android = withInterpreter(PINNED_RUNTIME, join(dir, "node-android"), "/system/bin/linker64");
      expect(spawnSync(android, ["--version"]).error).toBeDefined();
      const out = join(dir, "out");

      const alone = buildAndroid(["--runtime", android, "--out", out]);
      expect(alone.status).toBe(2);
      expect(alone.stderr).toMatch(
        /cannot run on this machine to make the SEA blob: give --blob-runtime PATH/,
      );
      expect(alone.stderr).toContain(PINNED_NODE);

      if (process.version !== PINNED_NODE) {
        const other = buildAndroid(["--runtime", android, "--blob-runtime", process.execPath, "--out", out]);
        expect(other.status).toBe(2);
        expect(other.stderr).toContain(`is node ${process.version}, the Android runtime is ${PINNED_NODE}`);
      }

      const r = buildAndroid(["--runtime", android, "--blob-runtime", PINNED_RUNTIME, "--out", out]);
      expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
      expect(r.stdout).not.toMatch(/stand-in/);
      expect(r.stdout).toMatch(/without a code cache/);
      expect(r.stdout).toMatch(/not run on this machine/);
      const sea = JSON.parse(readFileSync(join(out, ".build/x64/sea-config.json"), "utf8"));
      expect(sea.useCodeCache).toBe(false);
      const made = join(out, `mesh-host-${PACKAGE.version}-android-x64`);
      expect(elfOf(made)?.interpreter?.path).toBe("/system/bin/linker64");
      expect(readFileSync(join(out, "mesh-host.rc"), "utf8")).toBe(rcText());
      // given its loader back, the executable runs the blob another binary made
      const here = withInterpreter(made, join(dir, "runs-here"), "/lib64/ld-linux-x86-64.so.2");
      const v = spawnSync(here, ["version", "--json", "--host", "android"], { encoding: "utf8" });
      expect(v.status, v.stderr).toBe(0);
      expect(JSON.parse(v.stdout)).toMatchObject({ node: PINNED_NODE, host: "android" });
    },
    BUILD_MS,
  );
});
