// The binary as this process started: hashed only when asked, and never mistaken for the file put in its place.
import { createHash } from "node:crypto";
import { appendFileSync, renameSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BinaryAtStart } from "../../src/run/index.ts";
import { tempDir } from "../support/tmp.ts";

const sha256 = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");

describe("the binary as it started", () => {
  it("hashes what it opened at start, after pacman put a new file in its place", async () => {
    const dir = tempDir();
    const bin = join(dir, "mesh-host");
    // over one hash chunk, so the streamed read is the one tested
    const v1 = Buffer.alloc(3 * 1024 * 1024 + 17, 1);
    writeFileSync(bin, v1);
    const atStart = new BinaryAtStart(bin);
    writeFileSync(join(dir, "new"), "v2");
    renameSync(join(dir, "new"), bin);
    expect(await atStart.digest()).toBe(sha256(v1));
    // asked again: the same answer, not read a second time
    expect(await atStart.digest()).toBe(sha256(v1));
  });

  it("does not know its digest once its contents changed in place (never the new contents')", async () => {
    const dir = tempDir();
    const bin = join(dir, "mesh-host");
    writeFileSync(bin, "v1");
    const atStart = new BinaryAtStart(bin);
    appendFileSync(bin, "+v2");
    utimesSync(bin, new Date(), new Date(Date.now() + 5000));
    expect(await atStart.digest()).toBeNull();
  });

  it("takes the launcher's digest as given, without reading the file", async () => {
    const dir = tempDir();
    const bin = join(dir, "mesh-host");
    writeFileSync(bin, "v1");
    const atStart = new BinaryAtStart(bin, "a".repeat(64));
    writeFileSync(bin, "changed");
    expect(await atStart.digest()).toBe("a".repeat(64));
  });

  it("has no digest for a binary that could not be opened", async () => {
    const atStart = new BinaryAtStart(join(tempDir(), "absent"));
    expect(atStart.stamp).toBe("gone");
    expect(await atStart.digest()).toBeNull();
  });
});
