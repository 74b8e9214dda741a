// Real pacman against a throwaway root: small packages built with makepkg, a file:// repository made by
// repo-add, and a pacman config of the root's own (packaging.md: `--root` alone still uses the host's
// cache, GPG and hook directories).
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import type { Exec, ExecOptions } from "../../src/appliers/types.ts";
import { hostExec, must } from "./systemd.ts";

/**
 * makepkg refuses root: it runs in a user namespace where this process's uid 0 is seen as 1000, so the files
 * this process made are its own in there and no such user need exist.
 */
const BUILD_UID = 1000;
const REPO = "meshtest";
/** Any fixed time: two builds of one package are then byte-identical. */
const SOURCE_DATE_EPOCH = "1700000000";

export interface TestPackage {
  name: string;
  /** pkgver-pkgrel, e.g. "1.0-1". */
  version: string;
  depends?: string[];
  /** Files the package installs: path inside the root → content. */
  files?: Record<string, string>;
}

export interface PacmanRoot {
  /** The throwaway root pacman installs into: what a test gives appliers as `ports.root`. */
  root: string;
  conf: string;
  /** A PATH whose `pacman` runs against this root (its own config): for the built executable, as `exec` is in-process. */
  path: string;
  /** The command port: `pacman …` runs as `pacman --config <conf> …`; anything else runs as given. */
  exec: Exec;
  /** Build `pkgs`, add them to the repository, and refresh the root's copy of it. */
  publish(...pkgs: TestPackage[]): Promise<void>;
  /** Installed packages as `pacman -Q` lists them: name → version. */
  installed(): Promise<Record<string, string>>;
  remove(): void;
}

const filesOf = (p: TestPackage) => p.files ?? { [`/usr/share/${p.name}/version`]: `${p.version}\n` };

function pkgbuild(p: TestPackage): string {
  const [pkgver, pkgrel] = p.version.split("-");
  // each file's content sits beside the PKGBUILD as f<i>; $srcdir is <work>/src
  const installs = Object.keys(filesOf(p)).map(
    (path, i) => `  install -Dm644 "$srcdir/../f${i}" "$pkgdir${path}"`,
  );
  return [
    `pkgname=${p.name}`,
    `pkgver=${pkgver}`,
    `pkgrel=${pkgrel ?? "1"}`,
    `pkgdesc="mesh-host test package"`,
    "arch=(any)",
    "license=(MIT)",
    `depends=(${(p.depends ?? []).map((d) => `'${d}'`).join(" ")})`,
    "package() {",
    ...installs,
    "}",
    "",
  ].join("\n");
}

/** Build one package with makepkg as an unprivileged id in a user namespace; returns the package file's path. */
async function build(p: TestPackage, dir: string): Promise<string> {
  const work = join(dir, `${p.name}-${p.version}`);
  mkdirSync(work, { recursive: true });
  for (const [i, content] of Object.values(filesOf(p)).entries()) writeFileSync(join(work, `f${i}`), content);
  writeFileSync(join(work, "PKGBUILD"), pkgbuild(p));
  await must(
    [
      "unshare",
      "--user",
      `--map-user=${BUILD_UID}`,
      `--map-group=${BUILD_UID}`,
      "makepkg",
      "-d",
      "--nocolor",
    ],
    {
      cwd: work,
      env: { PKGEXT: ".pkg.tar.zst", SOURCE_DATE_EPOCH, HOME: work },
      timeoutMs: 60_000,
    },
  );
  const file = readdirSync(work).find((f) => f.endsWith(".pkg.tar.zst"));
  if (!file) throw new Error(`makepkg made no package for ${p.name}`);
  return join(work, file);
}

/**
 * `<dir>/pacman.conf` for a throwaway `root`: every directory pacman uses is under it, packages are unsigned,
 * and `repo`, when given, is a file:// repository. Its path.
 */
export function writePacmanConf(dir: string, root: string, repo?: { name: string; dir: string }): string {
  const conf = join(dir, "pacman.conf");
  writeFileSync(
    conf,
    [
      "[options]",
      `RootDir = ${root}`,
      `DBPath = ${root}/var/lib/pacman/`,
      `CacheDir = ${root}/var/cache/pacman/pkg/`,
      `LogFile = ${root}/var/log/pacman.log`,
      `GPGDir = ${root}/etc/pacman.d/gnupg/`,
      `HookDir = ${root}/etc/pacman.d/hooks/`,
      "Architecture = auto",
      // the test's packages are unsigned
      "SigLevel = Never",
      "LocalFileSigLevel = Never",
      ...(repo ? ["", `[${repo.name}]`, `Server = file://${repo.dir}`] : []),
      "",
    ].join("\n"),
  );
  return conf;
}

/** A throwaway root with its own pacman config and a file:// repository holding `pkgs`. */
export async function pacmanRoot(pkgs: [TestPackage, ...TestPackage[]]): Promise<PacmanRoot> {
  const dir = mkdtempSync(join(process.env.MESH_HOST_TEST_WORK ?? "/var/tmp", "mesh-host-pacman-"));
  const root = join(dir, "root");
  const repo = join(dir, "repo");
  const builds = join(dir, "build");
  for (const d of [
    "var/lib/pacman",
    "var/cache/pacman/pkg",
    "var/log",
    "etc/pacman.d/gnupg",
    "etc/pacman.d/hooks",
  ])
    mkdirSync(join(root, d), { recursive: true });
  mkdirSync(repo);
  mkdirSync(builds);
  const conf = writePacmanConf(dir, root, { name: REPO, dir: repo });
  const exec: Exec = {
    run: (argv: string[], opts?: ExecOptions) =>
      hostExec.run(argv[0] === "pacman" ? ["pacman", "--config", conf, ...argv.slice(1)] : argv, opts),
  };
  const bin = join(dir, "bin");
  mkdirSync(bin);
  const pacman = (await must(["sh", "-c", "command -v pacman"])).trim();
  writeFileSync(join(bin, "pacman"), `#!/bin/sh\nexec ${pacman} --config ${conf} "$@"\n`, { mode: 0o755 });

  const publish = async (...more: TestPackage[]) => {
    const built = await Promise.all(more.map((p) => build(p, builds)));
    // a file:// repository serves the package files from beside its database
    const files = built.map((f) => {
      const to = join(repo, basename(f));
      copyFileSync(f, to);
      return to;
    });
    await must(["repo-add", "-q", join(repo, `${REPO}.db.tar.gz`), ...files]);
    // -yy: a database regenerated within the same second is missed by -y
    await must(["pacman", "--config", conf, "-Syy", "--noconfirm"]);
  };
  await publish(...pkgs);

  return {
    root,
    conf,
    path: `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    exec,
    publish,
    async installed() {
      const r = await exec.run(["pacman", "-Q"]);
      return Object.fromEntries(
        r.stdout
          .split("\n")
          .filter(Boolean)
          .map((line) => line.split(" ") as [string, string]),
      );
    },
    remove() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
