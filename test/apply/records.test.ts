import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decl, machine } from "../support/offline.ts";
import { tempDir } from "../support/tmp.ts";

const setup = () => {
  const base = tempDir();
  mkdirSync(join(base, "root"));
  return machine(join(base, "root"), join(base, "state"));
};
const file = (id: string, path: string, content: string) => ({ id, type: "file", path, content });

describe("records parsed by their applier's record schema before any decision", () => {
  it("refuses a records file holding a record its applier cannot read, as any unreadable state file, touching nothing", async () => {
    const m = setup();
    await m.apply(decl([file("f", "/etc/one.conf", "x\n")]));
    const path = join(m.stateDir, "records.json");
    const kept = JSON.parse(readFileSync(path, "utf8"));
    // a file record without the digest it last wrote: not one the file applier reads
    delete kept.records.f.wrote;
    writeFileSync(path, JSON.stringify(kept));
    await expect(m.apply(decl([file("f", "/etc/one.conf", "y\n")]))).rejects.toThrow(
      `${path} is not a valid state file`,
    );
    expect(readFileSync(join(m.root, "etc/one.conf"), "utf8")).toBe("x\n");
  });

  it("keeps reading a record's fields it does not name, and a journalled pending one", async () => {
    const m = setup();
    await m.apply(decl([file("f", "/etc/one.conf", "x\n")]));
    const path = join(m.stateDir, "records.json");
    const kept = JSON.parse(readFileSync(path, "utf8"));
    kept.records.f = { ...kept.records.f, pending: true, later: "a newer field" };
    writeFileSync(path, JSON.stringify(kept));
    const r = await m.apply(decl([file("f", "/etc/one.conf", "x\n")]));
    expect(r.exit).toBe(0);
  });
});
