// The Arch package, end to end: `npm run package` (pkgbuild/package.sh) makes it from the built executable;
// real pacman installs, upgrades and removes it in a throwaway root with a config of its own (packaging.md);
// the binary that came out of the package is run, because a broken SEA is the one thing makepkg will not notice.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ACTION_MAX_TIMEOUT_S } from "../../src/defaults.ts";
import { elfFactsOf, entriesOf, namcapProblems, type PackageFacts, parsePkginfo } from "../support/namcap.ts";
import { writePacmanConf } from "../support/pacman.ts";
import { ensureSea, PACKAGE, PINNED_NODE, REPO } from "../support/sea.ts";

/** Any fixed time: two builds are then byte-identical. */
const SOURCE_DATE_EPOCH = "1700000000";
const PKGVER = PACKAGE.version.replaceAll("-", "_");
/** The empty root has no packages: the package's run-time dependencies (glibc and gcc-libs for the executable,
 * sh and coreutils for the launcher) are assumed there, as they are on any Arch machine (README). */
const ASSUME = ["glibc=2.40", "gcc-libs", "sh", "coreutils"].flatMap((p) => ["--assume-installed", p]);

let work: string;
let sea: string;
const pkgs: Record<"v1" | "v1again" | "v2", string> = { v1: "", v1again: "", v2: "" };

function sh(argv: string[], opts: { env?: Record<string, string>; cwd?: string } = {}) {
  const r = spawnSync(argv[0]!, argv.slice(1), {
    encoding: "utf8",
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "", all: `${r.stdout}${r.stderr}` };
}

function must(argv: string[], opts: { env?: Record<string, string>; cwd?: string } = {}) {
  const r = sh(argv, opts);
  if (r.code !== 0) throw new Error(`${argv.join(" ")} exited ${r.code}:\n${r.all}`);
  return r;
}

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/** `npm run package` with the given pkgrel, into `dest`; the staging directory is fixed so .BUILDINFO is. */
function makePackage(pkgrel: string, dest: string): string {
  const r = must(["bash", join(REPO, "pkgbuild/package.sh")], {
    env: {
      MESH_PKGREL: pkgrel,
      MESH_PKGDEST: dest,
      MESH_PKGWORK: join(work, "stage"),
      SOURCE_DATE_EPOCH,
      // zstd's default level: -19 (the shipped one) changes only the size, and takes a minute a package here
      MESH_PKGZST: "-3",
    },
  });
  const file = join(dest, `mesh-host-${PKGVER}-${pkgrel}-x86_64.pkg.tar.zst`);
  if (!existsSync(file)) throw new Error(`package.sh made no ${file}:\n${r.all}`);
  return file;
}

/** A throwaway root with a pacman config of its own: every directory pacman uses is under it. */
function pacmanRoot(name: string, repo?: string) {
  const dir = join(work, name);
  const root = join(dir, "root");
  mkdirSync(join(root, "var/lib/pacman"), { recursive: true });
  const conf = writePacmanConf(dir, root, repo ? { name: "meshtest", dir: repo } : undefined);
  // pacman wants root; an unprivileged run is root in a user namespace of its own (packaging.md)
  const asRoot = process.getuid?.() === 0 ? [] : ["unshare", "-Ur"];
  const pacman = (...args: string[]) => sh([...asRoot, "pacman", "--config", conf, "--noconfirm", ...args]);
  const installed = () => {
    const r = pacman("-Q", "mesh-host");
    return r.code === 0 ? r.stdout.trim() : null;
  };
  return { root, conf, pacman, installed };
}

/** The package's own state directory is empty on purpose; Node's release binaries are linked non-PIE. */
const EXCEPTIONS = {
  emptyDirs: { "var/lib/mesh-host": "drwx------" },
  nonPie: {
    "usr/bin/mesh-host": "the pinned Node runtime is linked as ET_EXEC upstream; we never relink it",
  },
};

/** What namcap reads of a package: its entries, .PKGINFO, its ELF files, and any file's text. */
function factsOf(pkg: string): PackageFacts {
  const out = mkdtempSync(join(work, "facts-"));
  must(["bsdtar", "-xf", pkg, "-C", out]);
  return {
    entries: entriesOf(pkg),
    info: parsePkginfo(readFileSync(join(out, ".PKGINFO"), "utf8")),
    elves: [elfFactsOf(join(out, "usr/bin/mesh-host"), "usr/bin/mesh-host")],
    read: (path) => readFileSync(join(out, path), "utf8"),
  };
}

function verifyUnit(root: string, unit: string) {
  return sh(["systemd-analyze", "verify", "--recursive-errors=no", "--man=no", `--root=${root}`, unit]);
}

beforeAll(() => {
  sea = ensureSea();
  work = mkdtempSync(join(process.env.MESH_HOST_TEST_WORK ?? tmpdir(), "mesh-pkg-"));
  pkgs.v1 = makePackage("1", join(work, "out-a"));
  pkgs.v1again = makePackage("1", join(work, "out-b"));
  pkgs.v2 = makePackage("2", join(work, "out-a"));
}, 600_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the Arch package", () => {
  it("is byte-identical when built twice with the same SOURCE_DATE_EPOCH", () => {
    expect(sha256(pkgs.v1again)).toBe(sha256(pkgs.v1));
    expect(sha256(pkgs.v2)).not.toBe(sha256(pkgs.v1));
  });

  it("holds the layout of packaging.md, and the executable unstripped", () => {
    const list = must(["bsdtar", "-tvf", pkgs.v1]).stdout;
    const entries = Object.fromEntries(
      list
        .trim()
        .split("\n")
        .map((l) => l.trim().split(/\s+/))
        .map((f) => [f[f.length - 1]!.replace(/\/$/, ""), f[0]!]),
    );
    expect(entries).toMatchObject({
      "usr/bin/mesh-host": "-rwxr-xr-x",
      "usr/lib/systemd/system/mesh-host.service": "-rw-r--r--",
      "usr/lib/mesh-host/launch": "-rwxr-xr-x",
      "usr/share/licenses/mesh-host/LICENSE": "-rw-r--r--",
      "usr/share/man/man1/mesh-host.1": "-rw-r--r--",
      "usr/share/man/man1/mesh-host-mesh.1": "-rw-r--r--",
      "usr/share/bash-completion/completions/mesh-host": "-rw-r--r--",
      "usr/share/zsh/site-functions/_mesh-host": "-rw-r--r--",
      "var/lib/mesh-host": "drwx------",
    });
    const files = Object.keys(entries).filter((p) => !entries[p]!.startsWith("d") && !p.startsWith("."));
    expect(files.sort()).toEqual([
      "usr/bin/mesh-host",
      "usr/lib/mesh-host/launch",
      "usr/lib/systemd/system/mesh-host.service",
      "usr/share/bash-completion/completions/mesh-host",
      "usr/share/licenses/mesh-host/LICENSE",
      "usr/share/man/man1/mesh-host-mesh.1",
      "usr/share/man/man1/mesh-host.1",
      "usr/share/zsh/site-functions/_mesh-host",
    ]);
    const pkginfo = must(["bsdtar", "-xOf", pkgs.v1, ".PKGINFO"]).stdout;
    expect(pkginfo).toContain(`pkgver = ${PKGVER}-1`);
    expect(pkginfo).toContain(`builddate = ${SOURCE_DATE_EPOCH}`);
    // the very bytes the build made: makepkg's strip would have left a binary that segfaults
    const out = join(work, "extracted");
    mkdirSync(out);
    must(["bsdtar", "-xf", pkgs.v1, "-C", out, "usr/bin/mesh-host"]);
    expect(sha256(join(out, "usr/bin/mesh-host"))).toBe(sha256(sea));
    // the man page and completions are the ones the build made from the command table (test/e2e/manual.test.ts)
    for (const [inPkg, built] of [
      ["usr/share/man/man1/mesh-host.1", "dist/mesh-host.1"],
      ["usr/share/man/man1/mesh-host-mesh.1", "dist/mesh-host-mesh.1"],
      ["usr/share/bash-completion/completions/mesh-host", "dist/completions/mesh-host.bash"],
      ["usr/share/zsh/site-functions/_mesh-host", "dist/completions/_mesh-host"],
    ]) {
      must(["bsdtar", "-xf", pkgs.v1, "-C", out, inPkg!]);
      expect(sha256(join(out, inPkg!)), inPkg).toBe(sha256(join(REPO, built!)));
    }
  });

  it("is namcap-clean: Arch's rules namcap checks, over the package itself", () => {
    const facts = factsOf(pkgs.v1);
    expect(namcapProblems(facts, EXCEPTIONS)).toEqual([]);
    const info = facts.info;
    expect(info.url).toEqual([PACKAGE.homepage]);
    expect(info.license).toEqual([PACKAGE.license]);
    expect(info.depend).toEqual(["glibc>=2.28", "gcc-libs", "sh", "coreutils"]);
    expect((info.optdepend ?? []).map((o) => o.split(":")[0])).toEqual([
      "pacman",
      "systemd",
      "docker",
      "podman",
      "wireguard-tools",
    ]);
    expect(facts.read("usr/share/licenses/mesh-host/LICENSE")).toBe(
      readFileSync(join(REPO, "LICENSE"), "utf8"),
    );
    expect(facts.read("usr/share/licenses/mesh-host/LICENSE")).toMatch(/^MIT License\n/);
  });

  it("namcap's rules, as written here, catch a package broken on purpose", () => {
    const facts = factsOf(pkgs.v1);
    const broken: PackageFacts = {
      ...facts,
      info: { ...facts.info, url: ["http://x"], optdepend: ["docker"], depend: ["sh"] },
      entries: [
        ...facts.entries.filter((e) => !e.path.startsWith("usr/share/licenses")),
        { path: "usr/local/bin/tool", mode: "-rwxrwxrwx", owner: "builder", group: "root" },
        { path: "etc/systemd/system/x.service", mode: "-rw-r--r--", owner: "root", group: "root" },
        { path: "usr/share/empty", mode: "drwxr-xr-x", owner: "root", group: "root" },
      ],
      elves: facts.elves.map((e) => ({ ...e, execStack: true, rpath: true })),
    };
    const problems = namcapProblems(broken, { emptyDirs: EXCEPTIONS.emptyDirs, nonPie: {} }).join("\n");
    for (const rule of [
      "pkginfo: url",
      'optdepend "docker" gives no reason',
      "fileownership: usr/local/bin/tool",
      "permissions: usr/local/bin/tool is world-writable",
      "hierarchy: usr/local/bin/tool is under usr/local/",
      "systemdlocation: etc/systemd/system/x.service",
      "emptydir: usr/share/empty",
      "license: MIT needs its text",
      "elffiles: usr/bin/mesh-host has an executable stack",
      "elffiles: usr/bin/mesh-host has an RPATH",
      "elffiles: usr/bin/mesh-host lacks PIE",
      "sodepends: usr/bin/mesh-host needs libstdc++.so.6 from gcc-libs",
      "sodepends: usr/bin/mesh-host needs libc.so.6 from glibc",
    ])
      expect(problems).toContain(rule);
  });

  it("has a unit that documents itself, stops gently and waits out the longest action", () => {
    const unit = must(["bsdtar", "-xOf", pkgs.v1, "usr/lib/systemd/system/mesh-host.service"]).stdout;
    const value = (key: string) => new RegExp(`^${key}=(.*)$`, "m").exec(unit)?.[1];
    expect(value("Documentation")).toBe(`man:mesh-host(1) ${PACKAGE.homepage}`);
    expect(value("KillMode")).toBe("mixed");
    // systemd's own parse of the time span, in microseconds
    const span = must(["systemd-analyze", "timespan", value("TimeoutStopSec")!]).stdout;
    const us = Number(/μs:\s*(\d+)/.exec(span)?.[1]);
    expect(us / 1e6).toBeGreaterThan(ACTION_MAX_TIMEOUT_S);
  });

  it("installs, runs from the root it went into, upgrades and is removed, and the state outlives it", () => {
    const m = pacmanRoot("lifecycle");
    const bin = join(m.root, "usr/bin/mesh-host");
    const stateDir = join(m.root, "var/lib/mesh-host");

    // install v1
    const install = m.pacman("-U", ...ASSUME, pkgs.v1);
    expect(install.code, install.all).toBe(0);
    expect(m.installed()).toBe(`mesh-host ${PKGVER}-1`);
    expect(statSync(stateDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(m.root, "usr/lib/mesh-host/launch")).mode & 0o777).toBe(0o755);

    // the installed binary runs: version, and apply of a small declaration
    const version = sh([bin, "version", "--json"]);
    expect(version.code, version.all).toBe(0);
    expect(JSON.parse(version.stdout)).toMatchObject({ version: PACKAGE.version, node: PINNED_NODE });
    const target = join(work, "lifecycle-target");
    const applyState = join(work, "lifecycle-apply-state");
    mkdirSync(target);
    const decl = join(work, "decl.json");
    writeFileSync(
      decl,
      JSON.stringify({
        v: 1,
        node: "pkg",
        mode: "converged",
        resources: [{ id: "motd", type: "file", path: "/etc/motd", content: "held by mesh-host\n" }],
      }),
    );
    const apply = sh([bin, "apply", decl, "--root", target, "--state", applyState]);
    expect(apply.code, apply.all).toBe(0);
    expect(readFileSync(join(target, "etc/motd"), "utf8")).toBe("held by mesh-host\n");

    // the launcher that came with it starts the installed binary, and counts the start
    const launchState = join(work, "lifecycle-launch-state");
    const launched = sh([join(m.root, "usr/lib/mesh-host/launch"), "version", "--state", launchState], {
      env: { MESH_HOST_BIN: bin },
    });
    expect(launched.code, launched.all).toBe(0);
    expect(launched.stdout).toContain(`node ${PINNED_NODE}`);
    expect(readFileSync(join(launchState, "launcher/state"), "utf8")).toContain("starts=1");

    // the host's state in the package's directory: files no package owns
    const confirmed = `${sha256(bin)}\n`;
    writeFileSync(join(stateDir, "confirmed"), confirmed);
    mkdirSync(join(stateDir, "outbox"));
    writeFileSync(join(stateDir, "outbox/0001.json"), "{}\n");

    // upgrade to v2: the state is untouched, the new binary runs
    const upgrade = m.pacman("-U", ...ASSUME, pkgs.v2);
    expect(upgrade.code, upgrade.all).toBe(0);
    expect(m.installed()).toBe(`mesh-host ${PKGVER}-2`);
    expect(readFileSync(join(stateDir, "confirmed"), "utf8")).toBe(confirmed);
    expect(sh([bin, "version"]).code).toBe(0);

    // remove: the package's files go, the state stays, still 0700
    const remove = m.pacman("-R", "mesh-host");
    expect(remove.code, remove.all).toBe(0);
    expect(m.installed()).toBeNull();
    for (const gone of [
      "usr/bin/mesh-host",
      "usr/lib/mesh-host/launch",
      "usr/lib/systemd/system/mesh-host.service",
    ])
      expect(existsSync(join(m.root, gone)), gone).toBe(false);
    expect(readFileSync(join(stateDir, "confirmed"), "utf8")).toBe(confirmed);
    expect(readFileSync(join(stateDir, "outbox/0001.json"), "utf8")).toBe("{}\n");
    expect(statSync(stateDir).mode & 0o777).toBe(0o700);
  });

  it("has a unit that systemd-analyze verify passes in the installed root, and fails when broken", () => {
    const m = pacmanRoot("verify");
    expect(m.pacman("-U", ...ASSUME, pkgs.v1).code).toBe(0);
    const ok = verifyUnit(m.root, "mesh-host.service");
    expect(ok.code, ok.all).toBe(0);
    expect(ok.all.trim()).toBe("");
    const unitDir = join(m.root, "usr/lib/systemd/system");
    const unit = readFileSync(join(unitDir, "mesh-host.service"), "utf8");
    const broken: Record<string, string> = {
      "a misspelt key": unit.replace("Restart=always", "Restrat=always"),
      "a bad value": unit.replace("Restart=always", "Restart=sometimes"),
      "a broken section header": unit.replace("[Service]", "[Service"),
      "an ExecStart that is not in the root": unit.replace(
        "/usr/lib/mesh-host/launch",
        "/usr/lib/mesh-host/nowhere",
      ),
    };
    for (const [what, text] of Object.entries(broken)) {
      writeFileSync(join(unitDir, "broken.service"), text);
      const r = verifyUnit(m.root, "broken.service");
      expect(r.code, `${what}: ${r.all}`).not.toBe(0);
    }
  });

  it("is served by a file:// repository made by repo-add, and pacman -S upgrades from it", () => {
    const repo = join(work, "repo");
    mkdirSync(repo);
    const m = pacmanRoot("repo", repo);
    copyFileSync(pkgs.v1, join(repo, "mesh-host-v1.pkg.tar.zst"));
    must(["repo-add", "-q", join(repo, "meshtest.db.tar.gz"), join(repo, "mesh-host-v1.pkg.tar.zst")]);
    // -yy: a database regenerated within the same second is missed by -y
    const first = m.pacman("-Syy", ...ASSUME, "mesh-host");
    expect(first.code, first.all).toBe(0);
    expect(m.installed()).toBe(`mesh-host ${PKGVER}-1`);
    copyFileSync(pkgs.v2, join(repo, "mesh-host-v2.pkg.tar.zst"));
    must(["repo-add", "-q", "-R", join(repo, "meshtest.db.tar.gz"), join(repo, "mesh-host-v2.pkg.tar.zst")]);
    const upgrade = m.pacman("-Syyu", ...ASSUME);
    expect(upgrade.code, upgrade.all).toBe(0);
    expect(m.installed()).toBe(`mesh-host ${PKGVER}-2`);
    expect(sh([join(m.root, "usr/bin/mesh-host"), "version"]).stdout).toContain(PINNED_NODE);
  });
});
