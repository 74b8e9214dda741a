import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeFileAtomicSync } from "../../src/durable/index.ts";
import {
  acceptedOf,
  acquireLock,
  LockBusy,
  moveInProgress,
  pendingNotes,
  readRun,
  State,
  StateError,
  StoreOriginals,
} from "../../src/store/index.ts";
import { spawnGroup } from "../support/processes.ts";
import { tempDir } from "../support/tmp.ts";

describe("atomic writes", () => {
  it("leaves the new content, the mode asked for, and no temporary file", () => {
    const dir = tempDir();
    const p = join(dir, "f");
    writeFileSync(p, "old");
    writeFileAtomicSync(p, "new", 0o600);
    expect(readFileSync(p, "utf8")).toBe("new");
    expect(statSync(p).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(["f"]);
  });
});

describe("the state directory", () => {
  it("is made 0700 and every file carries its format", () => {
    const dir = join(tempDir(), "state");
    const s = new State(dir);
    s.writeNode({ node: "n1", mode: "adopted" });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(join(dir, "node.json"), "utf8"))).toEqual({
      format: 1,
      node: "n1",
      mode: "adopted",
    });
  });

  it("refuses, clearly, a file in a newer format (a rollback must never misread v2's state)", () => {
    const dir = tempDir();
    writeFileSync(join(dir, "records.json"), JSON.stringify({ format: 2, records: {}, order: [] }));
    expect(() => new State(dir).readRecords()).toThrow(StateError);
    expect(() => new State(dir).readRecords()).toThrow(/format 2; this mesh-host reads format 1/);
  });

  it.each([
    ["records.json", (s: State) => s.readRecords(), { format: 1, records: { a: { path: "/a" } }, order: [] }],
    ["last.json", (s: State) => s.readLast(), { format: 1, seq: "7", outcome: "applied", at: "now" }],
    ["run.json", (s: State) => readRun(s), { format: 1, pid: 1 }],
    ["order.json", (s: State) => acceptedOf(s, "k"), { format: 1, meshes: { k: { serial: 0 } } }],
    ["move.json", (s: State) => moveInProgress(s), { format: 1, started_at: 5 }],
    ["declared.json", (s: State) => s.readDeclared(), "{ not json"],
  ])("reads %s through its schema: a malformed one is one line naming the file", (name, read, content) => {
    const dir = tempDir();
    writeFileSync(join(dir, name), typeof content === "string" ? content : JSON.stringify(content));
    let thrown: unknown;
    try {
      read(new State(dir));
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(StateError);
    const message = (thrown as Error).message;
    expect(message).toBe(
      `${join(dir, name)} ${typeof content === "string" ? "is not JSON" : "is not a valid state file"}`,
    );
  });
});

describe("notes left for the next report", () => {
  it("says each line of each note, and clears only what it read, once the report carrying them is kept", () => {
    const dir = tempDir();
    const state = new State(dir).ensure();
    writeFileSync(
      join(dir, "rollback-note"),
      "rolled back from a to b after 3 failed starts\nrolled back from c to b after 3 failed starts\n",
    );
    writeFileSync(join(dir, "move-note"), "move to nats://x failed: refused; returned to nats://y\n");
    const pending = pendingNotes(state);
    expect(pending.notes).toEqual([
      "rolled back from a to b after 3 failed starts",
      "rolled back from c to b after 3 failed starts",
      "move to nats://x failed: refused; returned to nats://y",
    ]);
    // a rollback written after they were read is not cleared with them
    writeFileSync(join(dir, "rollback-note"), "rolled back from d to b after 3 failed starts\n");
    pending.clear();
    expect(existsSync(join(dir, "move-note"))).toBe(false);
    expect(readFileSync(join(dir, "rollback-note"), "utf8")).toContain("from d to b");
  });
});

describe("originals", () => {
  it("keeps the first original for ever, and a later different content once beside it", async () => {
    const state = new State(tempDir());
    const originals = new StoreOriginals(state);
    const meta = { mode: 0o644, uid: 0, gid: 0 };
    const a = await originals.keep("/etc/x", Buffer.from("A"), meta);
    await originals.keep("/etc/x", Buffer.from("B"), meta);
    await originals.keep("/etc/x", Buffer.from("B"), meta);
    await originals.keep("/etc/x", Buffer.from("A"), meta);
    expect((await originals.original("/etc/x"))!.sha).toBe(a);
    expect(originals.list()).toEqual([{ path: "/etc/x", original: a, kept: 1 }]);
    // a fresh reader sees the same index
    expect(new StoreOriginals(state).list()).toEqual(originals.list());
    await originals.release("/etc/x");
    // given back, but ended only once the records no longer name it
    expect(readdirSync(join(state.dir, "holds"))).toHaveLength(3);
    originals.commit(0);
    expect(readdirSync(join(state.dir, "holds"))).toEqual(["index.json"]);
  });
});

describe("the lock", () => {
  it("serialises: a second taker waits, then times out naming the holder", async () => {
    const dir = tempDir();
    const first = await acquireLock(dir);
    await expect(acquireLock(dir, 200)).rejects.toThrow(LockBusy);
    first.release();
    const second = await acquireLock(dir, 200);
    second.release();
    expect(existsSync(join(dir, "lock"))).toBe(false);
  });

  it("is taken over from a holder killed with SIGKILL", async () => {
    const dir = tempDir();
    mkdirSync(dir, { recursive: true });
    const holder = spawnGroup(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import("${join(process.cwd(), "node_modules/tsx/dist/esm/api/index.mjs")}").then(async ({tsImport}) => { const m = await tsImport("${join(process.cwd(), "src/store/lock.ts")}", import.meta.url); await m.acquireLock(${JSON.stringify(dir)}); console.log("held"); setInterval(() => {}, 1000); })`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    await new Promise<void>((resolve) => holder.stdout!.once("data", () => resolve()));
    await expect(acquireLock(dir, 100)).rejects.toThrow(LockBusy);
    holder.kill("SIGKILL");
    await new Promise((r) => holder.once("exit", r));
    const lock = await acquireLock(dir, 2_000);
    expect(readFileSync(join(dir, "lock"), "utf8").split(" ")[0]).toBe(String(process.pid));
    lock.release();
  });
});
