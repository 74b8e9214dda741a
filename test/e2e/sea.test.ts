// The single executable itself: what it carries, what it refuses to take from its environment, and that a copy
// of it runs on a machine with nothing installed.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  ensureSea,
  PACKAGE,
  PINNED_NODE,
  PINNED_RUNTIME,
  REPO,
  SEA_PATH,
  seaVariant,
} from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

let sea: string;

beforeAll(() => {
  sea = ensureSea();
}, 600_000);

function run(bin: string, args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}) {
  return spawnSync(bin, args, { env: opts.env ?? {}, cwd: opts.cwd, encoding: "utf8", timeout: 120_000 });
}

describe("the single executable", () => {
  it("says its version, the commit it was built from, and the pinned Node inside it", () => {
    const r = run(sea, ["version", "--json"]);
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    const doc = JSON.parse(r.stdout);
    const head = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: REPO, encoding: "utf8" });
    expect(doc).toEqual({
      version: PACKAGE.version,
      commit: head.status === 0 ? head.stdout.trim() : "unknown",
      node: PINNED_NODE,
      host: expect.any(String),
    });
    // the pinned runtime, not whatever node the build or the test ran under
    expect(spawnSync(PINNED_RUNTIME, ["--version"], { encoding: "utf8" }).stdout.trim()).toBe(PINNED_NODE);
    expect(run(sea, ["version"]).stdout).toContain(`node ${PINNED_NODE}`);
  });

  it("does not let NODE_OPTIONS --require code into it", () => {
    const dir = tempDir();
    const marker = join(dir, "evil-ran");
    writeFileSync(
      join(dir, "evil.js"),
      `require("node:fs").writeFileSync(${JSON.stringify(marker)}, "ran");\n`,
    );
    const env = { NODE_OPTIONS: "--require ./evil.js", PATH: "/usr/bin:/bin" };
    // the control: the same runtime, as plain node, does run it
    expect(run(PINNED_RUNTIME, ["-e", "0"], { env, cwd: dir }).status).toBe(0);
    expect(existsSync(marker)).toBe(true);
    rmSync(marker);
    const r = run(sea, ["version"], { env, cwd: dir });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(PACKAGE.version);
    expect(existsSync(marker)).toBe(false);
  });

  it("prints no experimental-SEA warning", () => {
    const r = run(sea, ["version"]);
    expect(r.stderr).not.toMatch(/ExperimentalWarning|single executable/i);
  });

  it("is a copy that runs from an empty directory with an empty environment and no node anywhere", () => {
    const machine = tempDir("mesh-bare-");
    const bin = join(machine, "mesh-host");
    copyFileSync(sea, bin);
    chmodSync(bin, 0o755);
    const empty = join(machine, "empty");
    mkdirSync(empty);
    // `env -i`: nothing at all
    const r = run(bin, ["version", "--json"], { cwd: empty, env: {} });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).node).toBe(PINNED_NODE);
    // a PATH whose only node fails loudly: the executable never looks for one
    const trap = join(machine, "trap");
    mkdirSync(trap);
    writeFileSync(join(trap, "node"), `#!/bin/sh\necho "node was called" >&2\nexit 99\n`);
    chmodSync(join(trap, "node"), 0o755);
    expect(run(bin, ["version"], { cwd: empty, env: { PATH: trap } }).status).toBe(0);
  });

  it("applies a declaration from a copy, offline, under an empty environment", () => {
    const machine = tempDir("mesh-bare-");
    const bin = join(machine, "mesh-host");
    copyFileSync(sea, bin);
    const root = join(machine, "root");
    const state = join(machine, "state");
    mkdirSync(root);
    const decl = join(machine, "decl.json");
    writeFileSync(
      decl,
      JSON.stringify({
        v: 1,
        node: "bare",
        mode: "converged",
        resources: [
          { id: "site", type: "directory", path: "/srv/site", mode: "0755" },
          {
            id: "index",
            type: "file",
            path: "/srv/site/index.html",
            content: "hello from a copy\n",
            mode: "0640",
          },
        ],
      }),
    );
    const r = run(bin, ["apply", decl, "--root", root, "--state", state, "--json"], { cwd: machine });
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(join(root, "srv/site/index.html"), "utf8")).toBe("hello from a copy\n");
    expect(statSync(join(root, "srv/site/index.html")).mode & 0o777).toBe(0o640);
    expect(JSON.parse(r.stdout).report.outcome).toBeDefined();
  });

  it("has variants for upgrade tests: another digest, the same behaviour", () => {
    const dir = tempDir();
    const v2 = seaVariant(join(dir, "mesh-host-v2"), "v2");
    const digest = (f: string) => spawnSync("sha256sum", [f], { encoding: "utf8" }).stdout.split(" ")[0];
    expect(digest(v2)).not.toBe(digest(sea));
    expect(run(v2, ["version"]).stdout).toBe(run(sea, ["version"]).stdout);
  });

  it("refuses an unknown command with exit 2 and one line", () => {
    const r = run(sea, ["no-such-command"]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });
});

describe("the arm64 executable", () => {
  it("is stripped before injection (cross binutils) and runs, under qemu-user, as the x64 one does", () => {
    const qemu = "/usr/bin/qemu-aarch64-static";
    const sysroot = "/usr/aarch64-linux-gnu";
    const needed: [string, string][] = [
      ["/usr/bin/aarch64-linux-gnu-strip", "binutils-aarch64-linux-gnu"],
      [qemu, "qemu-user-static"],
      [`${sysroot}/lib/ld-linux-aarch64.so.1`, "libc6-arm64-cross"],
      [`${sysroot}/lib/libstdc++.so.6`, "libstdc++6-arm64-cross"],
    ];
    for (const [file, pkg] of needed)
      expect(existsSync(file), `${file} is missing: apt-get install ${pkg} (npm run setup does)`).toBe(true);
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    const build = spawnSync(process.execPath, [join(REPO, "build/build.mjs"), "--arch", "arm64"], {
      cwd: REPO,
      env,
      encoding: "utf8",
      timeout: 600_000,
    });
    expect(build.status, build.stderr).toBe(0);
    const exe = SEA_PATH.replace(/-x64$/, "-arm64");
    // no symbol table left: the cross strip ran (after injection it would segfault, so running it is the proof)
    const sections = spawnSync("aarch64-linux-gnu-readelf", ["-S", "-W", exe], { encoding: "utf8" }).stdout;
    expect(sections).not.toContain(".symtab");
    const r = spawnSync(qemu, ["-L", sysroot, exe, "version", "--json"], {
      encoding: "utf8",
      env: { PATH: "/usr/bin:/bin" },
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ version: PACKAGE.version, node: PINNED_NODE });
  }, 900_000);
});
