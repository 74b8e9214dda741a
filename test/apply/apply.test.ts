import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decl, machine } from "../support/offline.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

const setup = () => {
  const base = tempDir();
  mkdirSync(join(base, "root"));
  return machine(join(base, "root"), join(base, "state"));
};
const file = (id: string, path: string, content: string, extra: Record<string, unknown> = {}) => ({
  id,
  type: "file",
  path,
  content,
  ...extra,
});
const dids = (r: { report: { steps: { id: string; did: string }[] } }) =>
  r.report.steps.map((s) => `${s.id}:${s.did}`);

describe("apply, read back, say so", () => {
  it("creates, then changes nothing on a second apply (no file rewritten, no mtime moved)", async () => {
    const m = setup();
    const d = decl([
      { id: "d", type: "directory", path: "/srv/a", mode: "0750" },
      file("f", "/srv/a/x.conf", "one\n", { mode: "0640" }),
    ]);
    const first = await m.apply(d);
    expect(first.exit).toBe(0);
    expect(dids(first)).toEqual(["d:created", "f:created"]);
    expect(readFileSync(join(m.root, "srv/a/x.conf"), "utf8")).toBe("one\n");
    expect(statSync(join(m.root, "srv/a/x.conf")).mode & 0o777).toBe(0o640);
    expect(statSync(join(m.root, "srv/a")).mode & 0o777).toBe(0o750);
    const before = snapshot(m.root);
    const second = await m.apply(d);
    expect(dids(second)).toEqual(["d:unchanged", "f:unchanged"]);
    expect(snapshot(m.root)).toEqual(before);
  });

  it("leaves the records file untouched on a no-op, and rewrites it when only a record changed", async () => {
    const m = setup();
    const records = join(m.stateDir, "records.json");
    await m.apply(decl([file("a", "/etc/one.conf", "x\n")]));
    const written = statSync(records);
    expect(dids(await m.apply(decl([file("a", "/etc/one.conf", "x\n")])))).toEqual(["a:unchanged"]);
    expect(statSync(records)).toMatchObject({ ino: written.ino, mtimeMs: written.mtimeMs });
    // the same file, as it is, under another id: nothing on the machine changes, but its record moves
    expect(dids(await m.apply(decl([file("b", "/etc/one.conf", "x\n")])))).toEqual([
      "b:unchanged",
      "a:unchanged",
    ]);
    expect(Object.keys(JSON.parse(readFileSync(records, "utf8")).records)).toEqual(["b"]);
  });

  it("puts back a managed file edited by hand and says repaired; a changed declaration says updated", async () => {
    const m = setup();
    await m.apply(decl([file("f", "/etc/app.conf", "v1\n")]));
    writeFileSync(join(m.root, "etc/app.conf"), "edited by hand\n");
    const repaired = await m.apply(decl([file("f", "/etc/app.conf", "v1\n")]));
    expect(dids(repaired)).toEqual(["f:repaired"]);
    chmodSync(join(m.root, "etc/app.conf"), 0o600);
    expect(dids(await m.apply(decl([file("f", "/etc/app.conf", "v1\n", { mode: "0644" })])))).toEqual([
      "f:updated",
    ]);
    expect(dids(await m.apply(decl([file("f", "/etc/app.conf", "v2\n", { mode: "0644" })])))).toEqual([
      "f:updated",
    ]);
    expect(readFileSync(join(m.root, "etc/app.conf"), "utf8")).toBe("v2\n");
  });

  it("holds nothing of the mesh's own: a created file applied again unchanged is no original", async () => {
    const m = setup();
    const d = decl([file("f", "/made", "x")]);
    await m.apply(d);
    const again = await m.apply(d);
    expect(again.report.holds).toEqual([]);
  });

  it("writes content_b64 bytes exactly", async () => {
    const m = setup();
    await m.apply(
      decl([
        { id: "b", type: "file", path: "/bin.dat", content_b64: Buffer.from([0, 1, 255]).toString("base64") },
      ]),
    );
    expect([...readFileSync(join(m.root, "bin.dat"))]).toEqual([0, 1, 255]);
  });

  it("keeps the plan's sequence equal to the apply's outcomes", async () => {
    const m = setup();
    mkdirSync(join(m.root, "etc"));
    writeFileSync(join(m.root, "etc/found"), "found\n");
    await m.apply(decl([file("old", "/etc/old", "x"), file("keep", "/etc/keep", "k")]));
    writeFileSync(join(m.root, "etc/keep"), "drifted");
    const d = decl([
      file("keep", "/etc/keep", "k"),
      file("found", "/etc/found", "mesh's\n"),
      { id: "dir", type: "directory", path: "/var/lib/x" },
      { id: "on-found", type: "action", run: ["true"], on: ["found"] },
      { id: "on-dir-only", type: "action", run: ["true"], on: ["keep"], creates: "/var/lib/x" },
      { id: "always", type: "action", run: ["true"] },
    ]);
    const planned = await m.apply(d, { dryRun: true });
    const applied = await m.apply(d);
    expect(planned.plan.map((s) => `${s.id}:${s.did}`)).toEqual(dids(applied));
    expect(dids(applied)).toEqual([
      "keep:repaired",
      "found:updated",
      "dir:created",
      "on-found:ran",
      "on-dir-only:skipped",
      "always:ran",
      "old:removed",
    ]);
  });

  it("a dry run changes nothing", async () => {
    const m = setup();
    mkdirSync(join(m.root, "etc"));
    writeFileSync(join(m.root, "etc/found"), "found\n");
    const before = snapshot(m.root);
    const r = await m.apply(
      decl([
        file("f", "/etc/found", "new"),
        { id: "a", type: "action", run: ["touch", join(m.root, "touched")] },
      ]),
      {
        dryRun: true,
      },
    );
    expect(r.plan.map((s) => s.did)).toEqual(["updated", "ran"]);
    expect(snapshot(m.root)).toEqual(before);
    expect(existsSync(m.stateDir)).toBe(false);
  });
});

describe("undeclaring gives back what was found", () => {
  it("removes what the mesh created and restores what it found, then holds nothing", async () => {
    const m = setup();
    mkdirSync(join(m.root, "etc"));
    writeFileSync(join(m.root, "etc/hosts"), "original hosts\n", { mode: 0o600 });
    const r = await m.apply(
      decl([
        file("hosts", "/etc/hosts", "mesh hosts\n"),
        file("new", "/etc/new", "n"),
        { id: "d", type: "directory", path: "/opt/m" },
      ]),
    );
    expect(r.report.holds).toEqual([expect.objectContaining({ id: "hosts", path: "/etc/hosts" })]);
    const gone = await m.apply(decl([], { owns_nothing: true }));
    expect(dids(gone).sort()).toEqual(["d:removed", "hosts:restored", "new:removed"]);
    expect(readFileSync(join(m.root, "etc/hosts"), "utf8")).toBe("original hosts\n");
    expect(statSync(join(m.root, "etc/hosts")).mode & 0o777).toBe(0o600);
    expect(existsSync(join(m.root, "etc/new"))).toBe(false);
    expect(existsSync(join(m.root, "opt/m"))).toBe(false);
    expect(gone.report.holds).toEqual([]);
  });

  it("leaves a created file that was changed by hand since, and a created directory that holds others' files", async () => {
    const m = setup();
    await m.apply(decl([{ id: "d", type: "directory", path: "/data" }, file("f", "/data/f", "mesh")]));
    writeFileSync(join(m.root, "data/f"), "a person's edit");
    writeFileSync(join(m.root, "data/theirs"), "not the mesh's");
    const r = await m.apply(decl([], { owns_nothing: true }));
    expect(dids(r).sort()).toEqual(["d:unchanged", "f:unchanged"]);
    expect(readFileSync(join(m.root, "data/theirs"), "utf8")).toBe("not the mesh's");
    expect(readFileSync(join(m.root, "data/f"), "utf8")).toBe("a person's edit");
  });

  it("says nothing was removed when what the mesh created is already gone, in the plan and the apply alike", async () => {
    const m = setup();
    await m.apply(decl([{ id: "d", type: "directory", path: "/gone" }, file("f", "/gone/f", "mesh")]));
    rmSync(join(m.root, "gone"), { recursive: true });
    const undeclared = decl([], { owns_nothing: true });
    const plan = await m.apply(undeclared, { dryRun: true });
    const r = await m.apply(undeclared);
    for (const out of [plan, r]) expect(dids(out).sort()).toEqual(["d:unchanged", "f:unchanged"]);
    expect(r.report.steps.map((s) => s.detail).sort()).toEqual([
      "/gone was already gone: nothing was removed",
      "/gone/f was already gone: nothing was removed",
    ]);
    expect(dids(await m.apply(undeclared))).toEqual([]);
  });

  it("keeps the first original once: put back by hand and taken again, no copies grow (seed: growing copies)", async () => {
    const m = setup();
    mkdirSync(join(m.root, "etc"));
    writeFileSync(join(m.root, "etc/wg.conf"), "A\n");
    const d = decl([file("wg", "/etc/wg.conf", "mesh\n")]);
    await m.apply(d);
    // a person puts other content back by hand, twice; the mesh repairs each time
    for (let i = 0; i < 3; i++) {
      writeFileSync(join(m.root, "etc/wg.conf"), "B\n");
      await m.apply(d);
    }
    const holds = readdirSync(join(m.stateDir, "holds")).filter((n) => n !== "index.json");
    expect(holds).toHaveLength(2); // A (the original) and B (kept once beside it)
    await m.apply(decl([], { owns_nothing: true }));
    expect(readFileSync(join(m.root, "etc/wg.conf"), "utf8")).toBe("A\n");
    // taken over again: the same original, no new copy
    await m.apply(d);
    await m.apply(decl([], { owns_nothing: true }));
    expect(readFileSync(join(m.root, "etc/wg.conf"), "utf8")).toBe("A\n");
  });

  it("a changed path for the same id gives back the old one and makes the new one", async () => {
    const m = setup();
    await m.apply(decl([file("f", "/a", "x")]));
    const r = await m.apply(decl([file("f", "/b", "x")]));
    expect(dids(r)).toEqual(["f:removed", "f:created"]);
    expect(existsSync(join(m.root, "a"))).toBe(false);
    expect(existsSync(join(m.root, "b"))).toBe(true);
  });

  it("a path moving to another id stays the mesh's: nothing is held as found, and undeclared it is removed", async () => {
    const m = setup();
    await m.apply(decl([{ id: "d", type: "directory", path: "/srv/a" }, file("f", "/srv/a/x", "mesh\n")]));
    const moved = await m.apply(
      decl([{ id: "d2", type: "directory", path: "/srv/a" }, file("f2", "/srv/a/x", "mesh, again\n")]),
    );
    expect(moved.exit).toBe(0);
    expect(moved.report.holds).toEqual([]);
    const gone = await m.apply(decl([], { owns_nothing: true }));
    expect(dids(gone).sort()).toEqual(["d2:removed", "f2:removed"]);
    expect(existsSync(join(m.root, "srv/a"))).toBe(false);
    expect(gone.report.holds).toEqual([]);
  });
});

describe("actions", () => {
  it("reports exit status and output tail; a failure stops the apply and names what was not reached", async () => {
    const m = setup();
    const r = await m.apply(
      decl([
        { id: "say", type: "action", run: ["sh", "-c", "echo hello-out; exit 0"] },
        { id: "boom", type: "action", run: ["sh", "-c", "echo broke >&2; exit 3"] },
        file("after", "/after", "x"),
      ]),
    );
    expect(r.exit).toBe(1);
    expect(r.report.outcome).toBe("failed");
    expect(r.report.steps.map((s) => `${s.id}:${s.did}:${s.detail}`)).toEqual([
      "say:ran:exit 0: hello-out",
      "boom:failed:exit 3: broke",
      "after:not-reached:not reached: action boom failed",
    ]);
    expect(existsSync(join(m.root, "after"))).toBe(false);
  });

  it("runs argv without a shell, with env, and is killed at its timeout", async () => {
    const m = setup();
    const out = join(m.root, "out");
    const r = await m.apply(
      decl([
        {
          id: "argv",
          type: "action",
          run: ["sh", "-c", 'printf %s "$1$V" > "$2"', "sh", "$(no shell here)", out],
          env: { V: "!" },
        },
        { id: "slow", type: "action", run: ["sleep", "5"], timeout_s: 1 },
      ]),
    );
    expect(readFileSync(out, "utf8")).toBe("$(no shell here)!");
    expect(r.report.steps[1]).toMatchObject({
      did: "failed",
      detail: expect.stringContaining("timed out after 1 s"),
    });
  });

  it("skips an action whose `creates` exists, and one whose `on` did not change", async () => {
    const m = setup();
    const d = decl([
      file("f", "/f", "x"),
      { id: "once", type: "action", run: ["touch", join(m.root, "made")], creates: "/made" },
      { id: "on-f", type: "action", run: ["true"], on: ["f"] },
    ]);
    expect(dids(await m.apply(d))).toEqual(["f:created", "once:ran", "on-f:ran"]);
    expect(dids(await m.apply(d))).toEqual(["f:unchanged", "once:skipped", "on-f:skipped"]);
  });

  it("a program that does not exist is a clean failure", async () => {
    const m = setup();
    const r = await m.apply(decl([{ id: "nope", type: "action", run: ["/no/such/program"] }]));
    expect(r.report.steps[0]).toMatchObject({
      did: "failed",
      detail: expect.stringContaining("could not start"),
    });
  });
});

describe("safety", () => {
  it("fails the one resource whose parent is a symbolic link out of the root, applies the rest, writes nothing through it", async () => {
    const m = setup();
    const outside = tempDir("mesh-outside-");
    symlinkSync(outside, join(m.root, "escape"));
    const r = await m.apply(decl([file("ok", "/fine", "x"), file("evil", "/escape/pwned", "x")]));
    expect(r.exit).toBe(1);
    expect(r.report.refusals).toEqual([]);
    expect(r.plan.find((s) => s.id === "evil")?.did).toBe("failed");
    expect(r.report.steps.find((s) => s.id === "evil")).toMatchObject({
      did: "failed",
      detail: expect.stringContaining("leaves the root"),
    });
    expect(r.report.steps.find((s) => s.id === "ok")?.did).toBe("created");
    expect(readFileSync(join(m.root, "fine"), "utf8")).toBe("x");
    expect(readdirSync(outside)).toEqual([]);
  });

  it("looks at the machine afresh each apply: a parent turned into a link out of the root since the last is refused", async () => {
    const m = setup();
    expect((await m.apply(decl([file("conf", "/srv/app/conf", "one")]))).exit).toBe(0);
    // again, so /srv/app is there to be resolved while the apply decides
    expect((await m.apply(decl([file("conf", "/srv/app/conf", "one")]))).exit).toBe(0);
    const outside = tempDir("mesh-outside-");
    rmSync(join(m.root, "srv/app"), { recursive: true });
    symlinkSync(outside, join(m.root, "srv/app"));
    const r = await m.apply(decl([file("conf", "/srv/app/conf", "two")]));
    expect(r.exit).not.toBe(0);
    expect(JSON.stringify(r.report)).toContain("leaves the root");
    expect(readdirSync(outside)).toEqual([]);
  });

  it("never writes through a symbolic link at the target", async () => {
    const m = setup();
    const outside = tempDir("mesh-outside-");
    writeFileSync(join(outside, "target"), "theirs");
    symlinkSync(join(outside, "target"), join(m.root, "link"));
    const r = await m.apply(decl([file("l", "/link", "mesh")]));
    expect(r.exit).toBe(1);
    expect(r.report.steps[0]).toMatchObject({ id: "l", did: "failed" });
    expect(readFileSync(join(outside, "target"), "utf8")).toBe("theirs");
  });

  it("a removal never follows a symbolic link put where a managed file was", async () => {
    const m = setup();
    await m.apply(decl([file("f", "/victim", "mesh")]));
    const outside = tempDir("mesh-outside-");
    writeFileSync(join(outside, "precious"), "keep me");
    rmSync(join(m.root, "victim"));
    symlinkSync(join(outside, "precious"), join(m.root, "victim"));
    await m.apply(decl([], { owns_nothing: true }));
    expect(readFileSync(join(outside, "precious"), "utf8")).toBe("keep me");
  });

  it("purge removes only what nothing declares, and never what a link points at", async () => {
    const m = setup();
    const outside = tempDir("mesh-outside-");
    writeFileSync(join(outside, "precious"), "keep me");
    mkdirSync(join(m.root, "conf.d/sub"), { recursive: true });
    writeFileSync(join(m.root, "conf.d/stray"), "x");
    symlinkSync(outside, join(m.root, "conf.d/link"));
    const r = await m.apply(
      decl([
        { id: "d", type: "directory", path: "/conf.d", purge: true },
        file("keep", "/conf.d/sub/keep", "k"),
      ]),
    );
    expect(r.exit).toBe(0);
    expect(readdirSync(join(m.root, "conf.d")).sort()).toEqual(["sub"]);
    expect(readFileSync(join(outside, "precious"), "utf8")).toBe("keep me");
  });

  it("a crash after the journal does not turn the mesh's own file into a held original", async () => {
    const m = setup();
    // the journal is written before any file: simulate a crash right after the write of the file
    const d = decl([file("f", "/made-by-mesh", "mesh")]);
    await m.apply(d);
    const records = JSON.parse(readFileSync(join(m.stateDir, "records.json"), "utf8"));
    expect(records.records.f.created).toBe(true);
    await m.apply(decl([], { owns_nothing: true }));
    expect(existsSync(join(m.root, "made-by-mesh"))).toBe(false);
  });
});

describe("identity and mode", () => {
  it("a node takes the first declaration's name and refuses another", async () => {
    const m = setup();
    await m.apply(decl([file("f", "/f", "x")]));
    const r = await m.apply({ ...decl([file("f", "/f", "x")]), node: "other" });
    expect(r.exit).toBe(2);
    expect(r.report.refusals[0]).toMatchObject({ field: "node" });
  });

  it("an offline apply in the other mode is refused naming both and the act; a signed one from the link changes it", async () => {
    const m = setup();
    await m.apply(decl([file("f", "/f", "x")], { mode: "adopted" }));
    const r = await m.apply(decl([file("f", "/f", "x")], { mode: "converged" }));
    expect(r.exit).toBe(2);
    expect(r.report.refusals[0]!.reason).toMatch(/says converged, but this node is adopted.*converge/);
    const linked = await m.apply(decl([file("f", "/f", "x")], { mode: "converged" }), { source: "link" });
    expect(linked.exit).toBe(0);
    expect(JSON.parse(readFileSync(join(m.stateDir, "node.json"), "utf8")).mode).toBe("converged");
  });
});
