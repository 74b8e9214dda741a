import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { archAppliers } from "../../src/appliers/arch/index.ts";
import type { RecordOfAny } from "../../src/appliers/index.ts";
import { giveBackOf } from "../../src/apply/adopted.ts";
import { checkedBy } from "../../src/apply/records.ts";
import { type Host, makeHost } from "../../src/hosts/index.ts";
import { decl, machine } from "../support/offline.ts";
import { tempDir } from "../support/tmp.ts";

const setup = () => {
  const base = tempDir();
  mkdirSync(join(base, "root"));
  return machine(join(base, "root"), join(base, "state"));
};
const file = (id: string, path: string, content: string) => ({ id, type: "file", path, content });
/** Whether a record from disk is one its applier reads: its record schema parses it. */
const readableBy = (host: Host) => (record: RecordOfAny) => checkedBy(host)(record) !== undefined;

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

describe("the overlay's record, through its applier's record schema like every kind's", () => {
  // as the release before this one wrote it: the takeover's account as the store's journal keeps it
  const previous = {
    type: "overlay",
    interface: "mesh0",
    path: "/etc/wireguard/mesh0.conf",
    created: true,
    wrote: "a".repeat(64),
    found: { enabled: true, running: true },
    takeover: {
      interface: "wg0",
      state: "taken",
      port: 51820,
      address: "10.78.0.1",
      range: "10.78.0.0/24",
      peers: 1,
      mtu: 1380,
      path: "/etc/wireguard/wg0.conf",
      kept: "b".repeat(64),
      found: { enabled: true, running: true },
      at: "2026-12-01T10:00:00.000Z",
    },
  };
  const readable = readableBy(makeHost("arch", archAppliers()));

  it("reads a record written by the previous release, a takeover's account in it, and one without a takeover", () => {
    expect(readable(previous)).toBe(true);
    const { takeover: _none, ...plain } = previous;
    expect(readable(plain)).toBe(true);
    expect(readable({ ...previous, pending: true, later: "a newer field" })).toBe(true);
  });

  it("refuses one that says not what it found, or a takeover in another shape, before any decision", () => {
    const { found: _found, ...unfound } = previous;
    expect(readable(unfound)).toBe(false);
    expect(readable({ ...previous, takeover: { ...previous.takeover, state: "half" } })).toBe(false);
    expect(readable({ ...previous, created: "yes" })).toBe(false);
  });
});

describe("records of holds as the previous release wrote them: read, and given back as found by the one step", () => {
  const host = makeHost("arch", archAppliers());
  const readable = readableBy(host);
  // each kind's own record of a hold, exactly as its applier wrote it before the hold was one step
  const previous: [string, Record<string, unknown>, string][] = [
    [
      "ssh",
      {
        type: "service",
        unit: "sshd.service",
        held: true,
        found: { load: "loaded", enabled: "enabled", active: "active" },
      },
      "sshd.service left as it was found: it was held, never the mesh's",
    ],
    [
      "vim",
      { type: "package", name: "vim", found: { installed: true, version: "9.1-1" }, held: true },
      "vim left installed: it was found installed (9.1-1)",
    ],
    [
      "job",
      { type: "process", name: "job", scheduled: false, bundle: {}, declared: "c".repeat(64), held: true },
      "job left as it was found: it was held, never the mesh's",
    ],
    [
      "db",
      { type: "container", name: "db", runtime: "docker", created: false },
      "db left as it was found: it was held, never the mesh's",
    ],
  ];

  it.each(previous)(
    "%s: read by its applier's schema, and given back touching nothing",
    (id, record, said) => {
      expect(readable(record as RecordOfAny)).toBe(true);
      expect(giveBackOf(host, id, record as RecordOfAny)).toEqual({
        id,
        type: record.type,
        did: "unchanged",
        action: "give-back-as-found",
        detail: said,
        by: "apply",
      });
    },
  );

  it("leaves a record of what the mesh made to its applier's removal", () => {
    const made = {
      type: "service",
      unit: "web.service",
      found: { load: "not-found" },
      file: { created: true, wrote: "d".repeat(64) },
    };
    expect(readable(made)).toBe(true);
    expect(giveBackOf(host, "web", made)).toBeUndefined();
    expect(
      giveBackOf(host, "db", {
        type: "container",
        name: "db",
        runtime: "docker",
        created: true,
      } as RecordOfAny),
    ).toBeUndefined();
  });
});
