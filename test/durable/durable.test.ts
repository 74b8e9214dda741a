import {
  copyFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  commitTempSync,
  LockBusy,
  LockRefused,
  startTimeOf,
  sweepTempsBeside,
  takeLock,
  tempPathFor,
} from "../../src/durable/index.ts";
import { tempDir } from "../support/tmp.ts";

describe("the durable layer's lock, on any file", () => {
  it("names its holder by pid and start time, refuses a second taker while held, and is free once released", async () => {
    const path = join(tempDir(), "lock");
    const lock = await takeLock(path, 0);
    expect(readFileSync(path, "utf8")).toBe(`${process.pid} ${startTimeOf(process.pid)}\n`);
    await expect(takeLock(path, 50)).rejects.toThrow(LockBusy);
    lock.release();
    expect(existsSync(path)).toBe(false);
    (await takeLock(path, 0)).release();
  });

  it("takes over a lock whose pid lives on but started at another time (a recycled pid)", async () => {
    const path = join(tempDir(), "lock");
    writeFileSync(path, `${process.pid} 1\n`);
    const lock = await takeLock(path, 1_000);
    expect(readFileSync(path, "utf8").split(" ")[1]).toBe(`${startTimeOf(process.pid)}\n`);
    lock.release();
  });

  it("refuses a link planted where the lock goes at once, never waiting out the timeout", async () => {
    const dir = tempDir();
    const path = join(dir, "lock");
    symlinkSync(join(dir, "elsewhere"), path);
    await expect(takeLock(path, 60_000)).rejects.toThrow(LockRefused);
  });
});

describe("a temp file filled by a copy, made durable and renamed in", () => {
  it("replaces the file with the mode asked for and leaves no temp file; a killed writer's temps are swept", () => {
    const dir = tempDir();
    const target = join(dir, "bin");
    const source = join(dir, "src");
    writeFileSync(source, "new");
    writeFileSync(target, "old");
    const left = tempPathFor(target);
    writeFileSync(left, "torn");
    const temp = tempPathFor(target);
    copyFileSync(source, temp);
    commitTempSync(temp, target, 0o750);
    expect(readFileSync(target, "utf8")).toBe("new");
    expect(statSync(target).mode & 0o777).toBe(0o750);
    sweepTempsBeside(target);
    expect(readdirSync(dir).sort()).toEqual(["bin", "src"]);
  });
});
