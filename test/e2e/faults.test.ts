// Issue 27, item 19: a full disk and a read-only one, through the built executable, on real file systems the
// test mounts (a size-limited tmpfs each): a declared file that does not fit, a state directory that fills
// while an apply holds an original, one full from the start, and one mounted read-only. Each says the path
// and the cause in one line, leaves no torn state and nothing half-written, and the apply after space
// returns completes.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { useBuiltExecutable } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

useBuiltExecutable();

const mounted: string[] = [];
afterEach(() => {
  while (mounted.length) spawnSync("umount", [mounted.pop()!]);
});

/** A tmpfs of `size` at a new directory: a real file system that fills. */
function smallDisk(size: string): string {
  const dir = join(tempDir(), "disk");
  mkdirSync(dir);
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir], {
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`mounting a tmpfs needs root: ${r.stderr}`);
  mounted.push(dir);
  return dir;
}

const remount = (dir: string, options: string) => {
  const r = spawnSync("mount", ["-o", `remount,${options}`, dir], { encoding: "utf8" });
  expect(r.status, r.stderr).toBe(0);
};

const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");

function declaration(resources: unknown[]): string {
  const file = join(tempDir(), "d.json");
  writeFileSync(file, JSON.stringify({ v: 1, node: "n1", mode: "converged", resources }));
  return file;
}

/** The records as a later start reads them: whole JSON, or the test fails here. */
const recordsOf = (state: string) => JSON.parse(readFileSync(join(state, "records.json"), "utf8")).records;

describe("a full disk", () => {
  it("a declared file that does not fit fails its step naming the path and no space; nothing half-written; the next apply completes", async () => {
    const root = smallDisk("1m");
    const state = join(tempDir(), "state");
    // a directory between the files: file writes side by side would race for the last free pages, and
    // which of them is refused would be chance; one at a time, the big one is, and its temporary goes with it
    const file = declaration([
      { id: "big", type: "file", path: "/srv/big", content: "y".repeat(1_500_000) },
      { id: "var", type: "directory", path: "/var" },
      { id: "after", type: "file", path: "/var/after", content: "z\n" },
    ]);
    const r = await runCli(["apply", file, "--root", root, "--state", state, "--json"]);
    expect(r.code, r.stderr).toBe(1);
    const steps = JSON.parse(r.stdout).report.steps as { id: string; did: string; detail: string }[];
    expect(steps.map((s) => [s.id, s.did])).toEqual([
      ["big", "failed"],
      ["var", "created"],
      ["after", "created"],
    ]);
    expect(steps[0]!.detail).toBe("could not write /srv/big: no space left on the device (ENOSPC)");
    // no temporary left beside it, no torn file at its name
    expect(readdirSync(join(root, "srv"))).toEqual([]);
    expect(Object.keys(recordsOf(state)).sort()).toEqual(["after", "big", "var"]);

    remount(root, "size=4m");
    const again = await runCli(["apply", file, "--root", root, "--state", state]);
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(join(root, "srv/big"), "utf8")).toHaveLength(1_500_000);
    expect(readdirSync(join(root, "srv"))).toEqual(["big"]);
  });

  it("a state directory that fills while an original is held fails that step alone, the found file untouched; the next apply holds it", async () => {
    const root = join(tempDir(), "root");
    mkdirSync(join(root, "etc"), { recursive: true });
    // a found file larger than what the state's disk has left
    writeFileSync(join(root, "etc/big"), Buffer.alloc(100_000, "f"));
    const before = sha(join(root, "etc/big"));
    const state = smallDisk("64k");
    const file = declaration([
      { id: "small", type: "file", path: "/etc/small", content: "x\n" },
      { id: "big", type: "file", path: "/etc/big", content: "mine\n" },
      { id: "after", type: "file", path: "/etc/after", content: "z\n" },
    ]);
    const r = await runCli(["apply", file, "--root", root, "--state", state, "--json"]);
    expect(r.code, r.stderr).toBe(1);
    const steps = JSON.parse(r.stdout).report.steps as { id: string; did: string; detail: string }[];
    expect(steps.map((s) => s.did)).toEqual(["created", "failed", "created"]);
    expect(steps[1]!.detail).toBe(
      "/etc/big: its original could not be held in the state directory: no space left on the device (ENOSPC); it is left as found",
    );
    // never written over without its original held; no half-kept hold; the records whole
    expect(sha(join(root, "etc/big"))).toBe(before);
    expect(readdirSync(join(state, "holds"))).toEqual([]);
    expect(recordsOf(state).big).toBeUndefined();
    expect(readdirSync(state).filter((n) => n.startsWith("."))).toEqual([]);

    remount(state, "size=1m");
    const again = await runCli(["apply", file, "--root", root, "--state", state, "--json"]);
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(join(root, "etc/big"), "utf8")).toBe("mine\n");
    expect(JSON.parse(again.stdout).report.holds).toEqual([
      { id: "big", path: "/etc/big", original: before },
    ]);
  });

  it("a state directory full from the start: one line naming the state file and no space, nothing changed", async () => {
    const root = join(tempDir(), "root");
    mkdirSync(root);
    const state = smallDisk("64k");
    writeFileSync(join(state, "filler"), Buffer.alloc(64 * 1024 - 4096));
    const file = declaration([{ id: "a", type: "file", path: "/a", content: "x\n" }]);
    const r = await runCli(["apply", file, "--root", root, "--state", state]);
    expect(r.code).not.toBe(0);
    expect(
      r.stderr
        .trim()
        .split("\n")
        .filter((l) => l.startsWith("mesh-host:")),
    ).toEqual([
      expect.stringMatching(
        new RegExp(`^mesh-host: cannot write ${state}/[a-z-]+\\.json: no space left on the device$`),
      ),
    ]);
    expect(readdirSync(root)).toEqual([]);
  });
});

describe("a read-only state directory", () => {
  it("is one line at start, exit 2, nothing changed", async () => {
    const root = join(tempDir(), "root");
    mkdirSync(root);
    const state = smallDisk("1m");
    remount(state, "ro");
    const file = declaration([{ id: "a", type: "file", path: "/a", content: "x\n" }]);
    const r = await runCli(["apply", file, "--root", root, "--state", state]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(`mesh-host: cannot open ${state}/lock: the file system is read-only\n`);
    expect(readdirSync(root)).toEqual([]);
  });
});
