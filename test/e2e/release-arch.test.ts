// The Arch path of a release (issue 31): a machine booted with systemd as PID 1 (an nspawn container,
// test/support/systemd.ts) that says it is Arch, with real pacman, the package installed by `pacman -U` and its
// unit started by systemd; the mesh (`mesh init`, `mesh up`) on this machine. `mesh release add` of the next
// package, a declaration naming it: the node fetches it, `pacman -U` replaces /usr/bin/mesh-host, the host
// exits 0, systemd restarts the launcher, and the new release confirms itself.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import type { Running } from "../support/cli.ts";
import { ensureSea, PACKAGE, REPO, seaVariant } from "../support/sea.ts";
import { bootContainer, type Container, must } from "../support/systemd.ts";

const isRoot = process.getuid?.() === 0;
const hasMakepkg = spawnSync("sh", ["-c", "command -v makepkg && command -v pacman"]).status === 0;
/** Generous bounds on a loaded machine; every wait ends on an event well before. */
const DEADLINE_MS = 240_000;
const UNIT = "mesh-host.service";
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

let base: string;
let dir: string;
let up: Running | undefined;
let c: Container | undefined;

/** package.sh of `exe` as version `pkgver`, into `dest` (zstd's quick level: the level changes only the size). */
function makePackage(exe: string, pkgver: string): string {
  const dest = join(base, `out-${pkgver}`);
  const r = spawnSync("bash", [join(REPO, "pkgbuild/package.sh")], {
    encoding: "utf8",
    env: {
      ...process.env,
      MESH_EXE: exe,
      MESH_PKGVER: pkgver,
      MESH_PKGREL: "1",
      MESH_PKGDEST: dest,
      MESH_PKGWORK: join(base, `stage-${pkgver}`),
      SOURCE_DATE_EPOCH: "1700000000",
      MESH_PKGZST: "-3",
    },
    timeout: 300_000,
  });
  const file = join(dest, `mesh-host-${pkgver}-1-x86_64.pkg.tar.zst`);
  if (r.status !== 0 || !existsSync(file)) throw new Error(`package.sh: ${r.stdout}${r.stderr}`);
  return file;
}

/**
 * The container's Debian root has no pacman: this machine's (Debian's pacman-package-manager) and the libraries
 * it links are copied in, with a config for the machine's own `/`. The packages any Arch machine has (and the
 * mesh-host package depends on) are recorded in its local database, as they would be there.
 */
async function pacmanInside(container: Container): Promise<void> {
  const libs = spawnSync("ldd", ["/usr/bin/pacman"], { encoding: "utf8" })
    .stdout.split("\n")
    .map((l) => /=> (\/\S+)/.exec(l)?.[1])
    .filter((l): l is string => !!l);
  for (const file of ["/usr/bin/pacman", ...libs]) {
    const there = join(container.root, file);
    if (existsSync(there)) continue;
    mkdirSync(dirname(there), { recursive: true });
    copyFileSync(file, there);
  }
  for (const d of [
    "var/lib/pacman/local",
    "var/cache/pacman/pkg",
    "var/log",
    "etc/pacman.d/gnupg",
    "etc/pacman.d/hooks",
  ])
    mkdirSync(join(container.root, d), { recursive: true });
  writeFileSync(
    join(container.root, "etc/pacman.conf"),
    "[options]\nRootDir = /\nDBPath = /var/lib/pacman/\nArchitecture = auto\nSigLevel = Never\nLocalFileSigLevel = Never\n",
  );
  writeFileSync(join(container.root, "var/lib/pacman/local/ALPM_DB_VERSION"), "9\n");
  for (const [name, version] of [
    ["glibc", "2.40-1"],
    ["gcc-libs", "14.2.1-1"],
    ["bash", "5.2.037-1"],
    ["coreutils", "9.5-1"],
  ]) {
    const entry = join(container.root, `var/lib/pacman/local/${name}-${version}`);
    mkdirSync(entry, { recursive: true });
    const provides = name === "bash" ? "%PROVIDES%\nsh\n\n" : "";
    writeFileSync(join(entry, "desc"), `%NAME%\n${name}\n\n%VERSION%\n${version}\n\n${provides}`);
    writeFileSync(join(entry, "files"), "%FILES%\n\n");
  }
  // what the host reads to know it is on Arch
  writeFileSync(join(container.root, "etc/os-release"), 'NAME="Arch Linux"\nID=arch\n');
  const q = await container.exec.run(["pacman", "-Q"]);
  if (q.code !== 0) throw new Error(`pacman in the container: ${q.stderr}`);
}

const inside = (path: string) => join(c!.root, path);
const confirmedInside = () =>
  readFileSync(inside("var/lib/mesh-host/confirmed"), { flag: "a+" }).toString().trim();

async function until(what: string, probe: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + DEADLINE_MS;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const ready = isRoot && hasMakepkg;

beforeAll(async () => {
  if (!ready) return;
  ensureSea();
  base = mkdtempSync(join(process.env.MESH_HOST_TEST_WORK ?? tmpdir(), "mesh-release-arch-"));
  dir = join(base, "mesh");
  await initMesh(dir, await freePortPairs(1));
  up = await meshUp(dir);
  c = await bootContainer();
  await pacmanInside(c);
}, 600_000);

afterAll(async () => {
  await c?.stop();
  await up?.stop();
  if (base) rmSync(base, { recursive: true, force: true });
});

describe.skipIf(!ready)("an Arch node upgraded by its package, under systemd, with real pacman", () => {
  it("fetches the package, pacman -U replaces /usr/bin/mesh-host, exits 0; systemd restarts it and it confirms", async () => {
    const v1 = makePackage(ensureSea(), PACKAGE.version.replaceAll("-", "_"));
    const v2exe = seaVariant(join(base, "mesh-host-0.2.0-linux-x64"), "0.2.0");
    const v2 = makePackage(v2exe, "0.2.0");
    copyFileSync(v1, inside("var/tmp/v1.pkg.tar.zst"));
    await must([
      "nsenter",
      "-t",
      String(c!.leader),
      "-a",
      "pacman",
      "-U",
      "--noconfirm",
      "/var/tmp/v1.pkg.tar.zst",
    ]);
    const added = await mesh(dir, ["node", "add", "arch-1", "--code-file", join(base, "code")]);
    expect(added.code, added.stderr).toBe(0);
    copyFileSync(join(base, "code"), inside("var/tmp/code"));
    const enrol = await c!.exec.run(["mesh-host", "enrol", "--code-file", "/var/tmp/code"]);
    expect(enrol.code, enrol.stderr).toBe(0);
    await c!.systemctl("daemon-reload");
    const start = await c!.systemctl("start", UNIT);
    expect(start.code, start.stderr).toBe(0);
    const first = sha(readFileSync(inside("usr/bin/mesh-host")));
    await until("the packaged release confirmed", () => confirmedInside() === first);

    const stored = await mesh(dir, ["release", "add", v2]);
    expect(stored.code, stored.stderr).toBe(0);
    expect(stored.stdout).toMatch(/^stored release 0\.2\.0 for arch\/x64/);
    const body = join(base, "decl.json");
    writeFileSync(
      body,
      JSON.stringify({
        v: 1,
        mode: "converged",
        host: { release: "0.2.0" },
        resources: [{ id: "conf", type: "file", path: "/etc/app.conf", content: "on arch\n" }],
      }),
    );
    const pushed = await mesh(dir, ["push", "arch-1", body, "--wait-s", "300"]);
    expect(pushed.code, pushed.stdout + pushed.stderr).toBe(0);
    expect(pushed.stdout).toMatch(/release 0\.2\.0 installed: restarting onto it/);
    await until("0.2.0 confirmed", () => confirmedInside() === sha(readFileSync(v2exe)));
    expect(sha(readFileSync(inside("usr/bin/mesh-host")))).toBe(sha(readFileSync(v2exe)));
    expect((await c!.exec.run(["pacman", "-Q", "mesh-host"])).stdout.trim()).toBe("mesh-host 0.2.0-1");
    const restarts = await c!.systemctl("show", "-p", "NRestarts", "--value", UNIT);
    expect(Number(restarts.stdout.trim())).toBeGreaterThanOrEqual(1);
    expect(readFileSync(inside("etc/app.conf"), "utf8")).toBe("on arch\n");
  }, 900_000);
});
