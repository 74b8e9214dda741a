// The long commands say where they are: on a terminal one line that updates in place, off one plain lines.
// A terminal here is a real pty (`script` from util-linux), never a flag that pretends to be one.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ensureSea, REPO } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

/** A line redrawn in place: carriage return, then erase to the end of the line. */
const REDRAW = "\r\x1b[K";

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

/** `command` (a shell line) under a pty: what the terminal was sent, and the exit status. */
function onTerminal(command: string, env: Record<string, string> = {}) {
  const r = spawnSync("script", ["-qec", command, "/dev/null"], {
    cwd: REPO,
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 600_000,
  });
  return { code: r.status, out: r.stdout ?? "" };
}

/** The fast settings of the package tests: zstd -3, the output and staging under a temporary directory. */
function packageEnv(base: string): Record<string, string> {
  return { MESH_PKGZST: "-3", MESH_PKGDEST: join(base, "out"), MESH_PKGWORK: join(base, "stage") };
}

describe("progress", () => {
  it("npm run package on a terminal: makepkg's steps on one line that updates, then the package", () => {
    const r = onTerminal("npm run --silent package", packageEnv(tempDir()));
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain(`${REDRAW}package: makepkg: ==> Creating package "mesh-host"...`);
    // the seconds move on the line while makepkg works
    expect(r.out).toMatch(/\r\x1b\[Kpackage: makepkg: [^\r]* \(\d+ s\)/);
    expect(r.out).toMatch(/\r\x1b\[Kpackage: \S+mesh-host-[\d.]+-1-x86_64\.pkg\.tar\.zst [\d.]+ MiB/);
  }, 600_000);

  it("npm run package off a terminal: a plain line a step, no line redrawn", () => {
    const base = tempDir();
    const r = spawnSync("npm", ["run", "--silent", "package"], {
      cwd: REPO,
      encoding: "utf8",
      env: { ...process.env, ...packageEnv(base) },
      timeout: 600_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain("package: makepkg: ==> Creating package");
    expect(r.stderr).toMatch(/^package: makepkg done in \d+ s$/m);
    expect(r.stderr + r.stdout).not.toContain("\r");
    expect(r.stdout).toMatch(/^package: \S+\.pkg\.tar\.zst [\d.]+ MiB in \d+ ms/);
  }, 600_000);

  it("npm run build on a terminal: each step on the updating line, each result a line of its own", () => {
    const r = onTerminal("npm run --silent build");
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain(`${REDRAW}build: bundling src/ with esbuild`);
    expect(r.out).toContain(`${REDRAW}build: writing the man pages and completions`);
    expect(r.out).toMatch(/build: dist\/mesh-host-[\d.]+-linux-x64 [\d.]+ MiB, [\d.]+ s in all/);
  }, 600_000);

  it("the executable's progress line (mesh push waiting on nodes) redraws on a terminal, plain off one", () => {
    const base = tempDir();
    const script = join(base, "say.ts");
    writeFileSync(
      script,
      [
        `import { progress } from ${JSON.stringify(join(REPO, "src/cli/progress.ts"))};`,
        `const line = progress("mesh push");`,
        `line.step("0 of 2 reported, waiting on web-1, web-2");`,
        `line.step("web-1 reported applied; 1 of 2 reported, waiting on web-2");`,
        `line.clear();`,
        `process.stdout.write("web-1: serial 1\\n");`,
      ].join("\n"),
    );
    const tsx = join(REPO, "node_modules/.bin/tsx");
    const tty = onTerminal(`${tsx} ${script}`);
    expect(tty.code, tty.out).toBe(0);
    expect(tty.out).toContain(`${REDRAW}mesh push: 0 of 2 reported, waiting on web-1, web-2 (0 s)`);
    expect(tty.out).toContain(`${REDRAW}mesh push: web-1 reported applied; 1 of 2 reported`);
    // cleared before the result: the result starts a clean line
    expect(tty.out).toMatch(/\r\x1b\[Kweb-1: serial 1/);
    const plain = spawnSync(tsx, [script], { encoding: "utf8" });
    expect(plain.stderr).toBe(
      "mesh push: 0 of 2 reported, waiting on web-1, web-2\nmesh push: web-1 reported applied; 1 of 2 reported, waiting on web-2\n",
    );
    expect(plain.stdout).toBe("web-1: serial 1\n");
  }, 120_000);
});
