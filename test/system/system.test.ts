// The no-follow walk itself (src/system): every declared path reached one component at a time from a handle
// on the root, no link followed wherever it sits or whenever it appears, every effect on a handle.
import {
  chmodSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { KEPT_DIR_HANDLES_MAX } from "../../src/defaults.ts";
import { createArgv, envFileFds } from "../../src/system/arch/runtime.ts";
import { localExec } from "../../src/system/exec.ts";
import {
  chmodDirAt,
  entryAt,
  forgetHandles,
  keptDir,
  openDirAt,
  PathRefused,
  readFileAt,
  removeDirAt,
  removeFileAt,
  removeTreeAt,
  writeFileAt,
} from "../../src/system/index.ts";
import type { ContainerResource } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { spawnGroup } from "../support/processes.ts";
import { tempDir } from "../support/tmp.ts";

const W = { mode: 0o644, dirMode: 0o755 };

function place() {
  const root = tempDir("mesh-walk-root-");
  const outside = tempDir("mesh-walk-outside-");
  writeFileSync(join(outside, "precious"), "keep me\n");
  chmodSync(outside, 0o700);
  return { root, outside };
}

afterEach(() => forgetHandles());

describe("a link in the way is refused, never followed", () => {
  it("a dangling link as a parent: nothing made at its target, the refusal names the path and the link", async () => {
    const { root, outside } = place();
    symlinkSync(join(outside, "not-yet"), join(root, "dangling"));
    await expect(writeFileAt(root, "/dangling/f", Buffer.from("x"), W)).rejects.toThrow(
      "a parent of /dangling/f (/dangling) is a symbolic link; it is not followed",
    );
    expect(existsSync(join(outside, "not-yet"))).toBe(false);
    expect(entryAt(root, "/dangling/f")).toBe(
      "a parent of /dangling/f (/dangling) is a symbolic link; it is not followed",
    );
    expect(await readFileAt(root, "/dangling/f", true)).toContain("is a symbolic link");
  });

  it("a link to a directory inside the root is refused too: a link is never followed, wherever it points", async () => {
    const { root } = place();
    mkdirSync(join(root, "real"));
    symlinkSync("real", join(root, "alias"));
    await expect(writeFileAt(root, "/alias/f", Buffer.from("x"), W)).rejects.toBeInstanceOf(PathRefused);
    expect(readdirSync(join(root, "real"))).toEqual([]);
    expect(() => openDirAt(root, "/alias/sub", 0o755)).toThrow(
      "a parent of /alias/sub (/alias) is a symbolic link;",
    );
    expect(existsSync(join(root, "real/sub"))).toBe(false);
  });

  it("a link to a directory outside the root says it leaves the root", async () => {
    const { root, outside } = place();
    mkdirSync(join(root, "a"));
    symlinkSync(outside, join(root, "a/b"));
    const problem = entryAt(root, "/a/b/c/d");
    expect(problem).toBe(
      "a parent of /a/b/c/d (/a/b) is a symbolic link that leaves the root; it is not followed",
    );
    await expect(writeFileAt(root, "/a/b/c/d", Buffer.from("x"), W)).rejects.toThrow("leaves the root");
    expect(readdirSync(outside)).toEqual(["precious"]);
  });

  it("a link as the last component: read as a link, never written through, chmod refused, removal takes the link", async () => {
    const { root, outside } = place();
    symlinkSync(join(outside, "precious"), join(root, "f"));
    symlinkSync(outside, join(root, "d"));
    expect(entryAt(root, "/f")).toMatchObject({ kind: "link" });
    expect(await readFileAt(root, "/f")).toBe("/f is a symbolic link; it is not followed");
    // the rename replaces the link itself: what it pointed at is never opened
    await writeFileAt(root, "/f", Buffer.from("mesh\n"), W);
    expect(lstatSync(join(root, "f")).isFile()).toBe(true);
    expect(readFileSync(join(outside, "precious"), "utf8")).toBe("keep me\n");
    expect(() => chmodDirAt(root, "/d", 0o777)).toThrow(
      "/d is a symbolic link that leaves the root; it is not followed",
    );
    expect(statSync(outside).mode & 0o777).toBe(0o700);
    expect(removeTreeAt(root, "/d")).toBe("/d is a symbolic link; it was left, not followed");
    expect(() => removeDirAt(root, "/d")).toThrow(
      "could not remove /d: a part of the path is not a directory (ENOTDIR)",
    );
    expect(lstatSync(join(root, "d")).isSymbolicLink()).toBe(true);
    expect(removeFileAt(root, "/d")).toBe(true);
    expect(existsSync(join(root, "d"))).toBe(false);
    expect(readdirSync(outside)).toEqual(["precious"]);
  });

  it("a tree removal removes a link inside it, never what it points at", () => {
    const { root, outside } = place();
    mkdirSync(join(root, "t/sub"), { recursive: true });
    writeFileSync(join(root, "t/sub/x"), "x");
    symlinkSync(outside, join(root, "t/sub/out"));
    expect(removeTreeAt(root, "/t")).toEqual({ files: 2, existed: true });
    expect(existsSync(join(root, "t"))).toBe(false);
    expect(readdirSync(outside)).toEqual(["precious"]);
  });

  it("a path with a '.' or '..' component is never walked (the vocabulary normalises; the walk refuses anyway)", () => {
    const { root } = place();
    expect(() => keptDir(root, "/a/../etc", "/a/../etc/x")).toThrow("is not a normalised path");
    expect(() => openDirAt(root, "/a/./b")).toThrow("is not a normalised path");
  });

  it("makes missing parents one at a time with the mode given, the umask aside", async () => {
    const { root } = place();
    await writeFileAt(root, "/x/y/z", Buffer.from("z"), { mode: 0o600, dirMode: 0o750 });
    expect(statSync(join(root, "x/y/z")).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, "x")).isDirectory()).toBe(true);
    expect(await readFileAt(root, "/x/y/z", true)).toMatchObject({ mode: 0o600 });
  });
});

describe("handles kept for one apply's decisions", () => {
  it("stay bounded however many directories a declaration names", () => {
    const { root } = place();
    const open = () => readdirSync("/proc/self/fd").length;
    const before = open();
    for (let i = 0; i < 600; i++) {
      mkdirSync(join(root, `d${i}`));
      expect(entryAt(root, `/d${i}/f`)).toBeNull();
    }
    expect(open() - before).toBeLessThanOrEqual(KEPT_DIR_HANDLES_MAX + 1);
    forgetHandles();
    expect(open()).toBe(before);
  });
});

describe("a swap after the walk cannot redirect an effect", () => {
  it("a handle holds the directory it reached: a link swapped in at its name since is not where the chmod lands", () => {
    const { root, outside } = place();
    mkdirSync(join(root, "d"), { mode: 0o755 });
    const fd = openDirAt(root, "/d");
    try {
      // the swap: the directory moved aside, a link to outside put at its name
      renameSync(join(root, "d"), join(root, "d.moved"));
      symlinkSync(outside, join(root, "d"));
      chmodSync(`/proc/self/fd/${fd}`, 0o777);
    } finally {
      closeSync(fd);
    }
    expect(statSync(outside).mode & 0o777).toBe(0o700);
    expect(statSync(join(root, "d.moved")).mode & 0o777).toBe(0o777);
    // and an effect walked afresh now finds the link and refuses
    expect(() => chmodDirAt(root, "/d", 0o777)).toThrow(
      "/d is a symbolic link that leaves the root; it is not followed",
    );
  });

  it("decisions keep their handles for the apply; effects walk afresh and refuse the link swapped in since", async () => {
    const { root, outside } = place();
    mkdirSync(join(root, "srv/app"), { recursive: true });
    expect(entryAt(root, "/srv/app/conf")).toBeNull();
    renameSync(join(root, "srv/app"), join(root, "srv/app.moved"));
    symlinkSync(outside, join(root, "srv/app"));
    await expect(writeFileAt(root, "/srv/app/conf", Buffer.from("x"), W)).rejects.toThrow(
      "a parent of /srv/app/conf (/srv/app) is a symbolic link that leaves the root; it is not followed",
    );
    expect(readdirSync(outside)).toEqual(["precious"]);
  });

  it("a directory swapped for a link and back as fast as a process can, while 300 files are written under it", async () => {
    const { root, outside } = place();
    mkdirSync(join(root, "srv/app"), { recursive: true });
    const ready = join(root, "swapping");
    // another process swaps /srv/app for a link out of the root and back, without pause, until killed
    const swapper = spawnGroup(
      process.execPath,
      [
        "-e",
        `const fs = require("fs");
         const [dir, out, ready] = process.argv.slice(1);
         fs.writeFileSync(ready, "");
         for (;;) {
           try { fs.renameSync(dir, dir + ".aside"); } catch {}
           try { fs.symlinkSync(out, dir); } catch {}
           try { fs.unlinkSync(dir); } catch {}
           try { fs.renameSync(dir + ".aside", dir); } catch {}
         }`,
        join(root, "srv/app"),
        outside,
        ready,
      ],
      { stdio: "ignore" },
    );
    try {
      const until = Date.now() + EVENT_WAIT_MS;
      while (!existsSync(ready) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      let written = 0;
      let refused = 0;
      for (let i = 0; i < 300; i++) {
        try {
          await writeFileAt(root, `/srv/app/f${i}`, Buffer.from(`${i}\n`), W);
          written++;
        } catch (e) {
          // refused: a link in the way, or the directory gone for an instant; never written through
          expect(e).toBeInstanceOf(Error);
          refused++;
        }
      }
      expect(written + refused).toBe(300);
    } finally {
      swapper.kill("SIGKILL");
      await new Promise((r) => swapper.once("exit", r));
    }
    expect(readdirSync(outside)).toEqual(["precious"]);
  });
});

describe("a file handed to another program goes as an fd, never as a name", () => {
  it("env-files: each opened with no link followed, read by the child as /dev/fd/N; a linked one is refused", async () => {
    const { root, outside } = place();
    mkdirSync(join(root, "srv"));
    writeFileSync(join(root, "srv/a.env"), "A=1\n");
    writeFileSync(join(root, "srv/b.env"), "B=2\n");
    const w = { env_files: ["/srv/a.env", "/srv/b.env"] } as unknown as ContainerResource;
    const fds = envFileFds(w, root);
    if (typeof fds === "string") throw new Error(fds);
    const argv = createArgv({ ...w, name: "c", restart: "no" } as ContainerResource, root, "img", "s").create;
    expect(argv.filter((a) => a.startsWith("/dev/fd/"))).toEqual(["/dev/fd/3", "/dev/fd/4"]);
    try {
      const r = await localExec().run(["cat", "/dev/fd/3", "/dev/fd/4"], { fds });
      expect(r.stdout).toBe("A=1\nB=2\n");
    } finally {
      for (const fd of fds) closeSync(fd);
    }
    symlinkSync(join(outside, "precious"), join(root, "srv/c.env"));
    expect(envFileFds({ env_files: ["/srv/a.env", "/srv/c.env"] } as ContainerResource, root)).toBe(
      "env_files.1: /srv/c.env is a symbolic link; it is not followed",
    );
  });
});
