// package against real pacman: packages built by makepkg, served from a file:// repository, installed into a
// throwaway root with a pacman config of its own. What was found installed stays installed.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDeclaration } from "../../src/vocabulary/index.ts";
import { decl } from "../support/offline.ts";
import { type PacmanRoot, pacmanRoot } from "../support/pacman.ts";
import { ensureSea, seaMachine } from "../support/sea.ts";
import {
  type ArchMachine,
  archHost,
  detailOf,
  dids,
  freshArchMachine,
  hostExec,
} from "../support/systemd.ts";
import { tempDir } from "../support/tmp.ts";

let p: PacmanRoot;
beforeAll(async () => {
  p = await pacmanRoot([
    { name: "mesh-test-hello", version: "1.0-1" },
    { name: "mesh-test-found", version: "2.3-1" },
    { name: "mesh-test-lib", version: "1.0-1" },
    { name: "mesh-test-app", version: "1.0-1", depends: ["mesh-test-lib"] },
    { name: "mesh-test-up", version: "1.0-1" },
    { name: "mesh-test-adopt", version: "1.0-1" },
    { name: "mesh-test-aside", version: "1.0-1" },
    { name: "mesh-test-left", version: "1.0-1" },
  ]);
});
afterAll(() => p?.remove());

const fresh = (): ArchMachine => freshArchMachine(p.root, p.exec);
const nothing = decl([], { owns_nothing: true });
const pkg = (id: string, name: string, version?: string) => ({
  id,
  type: "package",
  name,
  ...(version ? { version } : {}),
});

describe("package", () => {
  it("installs what is absent, reads it back with pacman -Q, and removes it when undeclared", async () => {
    const m = fresh();
    const d = decl([pkg("hello", "mesh-test-hello")]);
    const plan = await m.apply(d, { dryRun: true });
    expect(plan.plan.map((s) => s.did)).toEqual(["created"]);
    expect((await p.installed())["mesh-test-hello"]).toBeUndefined();
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["hello:created"]);
    expect(detailOf(r, "hello")).toContain("read back mesh-test-hello 1.0-1");
    expect((await p.installed())["mesh-test-hello"]).toBe("1.0-1");
    expect(m.records().hello).toMatchObject({ found: { installed: false } });
    expect(dids(await m.apply(d))).toEqual(["hello:unchanged"]);
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["hello:removed"]);
    expect((await p.installed())["mesh-test-hello"]).toBeUndefined();
  });

  it("what was found installed stays installed when undeclared", async () => {
    const m = fresh();
    expect((await p.exec.run(["pacman", "-S", "--noconfirm", "mesh-test-found"])).code).toBe(0);
    const r = await m.apply(decl([pkg("found", "mesh-test-found", "2.3-1")]));
    expect(dids(r)).toEqual(["found:unchanged"]);
    expect(m.records().found).toMatchObject({ found: { installed: true, version: "2.3-1" } });
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["found:unchanged"]);
    expect(detailOf(gone, "found")).toContain("left installed: it was found installed (2.3-1)");
    expect((await p.installed())["mesh-test-found"]).toBe("2.3-1");
  });

  it("found installed, then undeclared, through the executable: a step says unchanged (left as found), like a service", async () => {
    const files = tempDir("mesh-decl-");
    const machine = () =>
      seaMachine({
        exec: hostExec,
        bin: ensureSea(),
        root: p.root,
        state: tempDir("mesh-arch-state-"),
        here: files,
        there: files,
        env: { PATH: p.path },
      });
    expect((await p.exec.run(["pacman", "-S", "--noconfirm", "mesh-test-left"])).code).toBe(0);
    for (const mode of ["adopted", "converged"]) {
      const m = machine();
      const first = await m.apply(decl([pkg("left", "mesh-test-left")], { mode }));
      expect(first.exit, first.stderr).toBe(0);
      expect(dids(first)).toEqual(["left:unchanged"]);
      const gone = await m.apply(decl([], { owns_nothing: true, mode }));
      expect(gone.exit, gone.stderr).toBe(0);
      // the plan says it, and the report does: one step, left as found
      expect(gone.plan).toEqual([expect.objectContaining({ id: "left", did: "unchanged" })]);
      expect(dids(gone)).toEqual(["left:unchanged"]);
      expect(detailOf(gone, "left")).toBe("mesh-test-left left installed: it was found installed (1.0-1)");
      expect((await p.installed())["mesh-test-left"]).toBe("1.0-1");
    }
  });

  it("an exact version the repository does not carry fails with pacman's own words, and installs nothing", async () => {
    const m = fresh();
    const r = await m.apply(decl([pkg("v", "mesh-test-hello", "9.9-1")]));
    expect(r.exit).toBe(1);
    expect(dids(r)).toEqual(["v:failed"]);
    expect(detailOf(r, "v")).toContain("error: target not found: mesh-test-hello=9.9-1");
    expect((await p.installed())["mesh-test-hello"]).toBeUndefined();
  });

  it("a declared version is installed exactly: an upgrade to it says updated and reads it back", async () => {
    const m = fresh();
    await m.apply(decl([pkg("up", "mesh-test-up", "1.0-1")]));
    await p.publish({ name: "mesh-test-up", version: "1.1-1" });
    // still satisfied by what is installed: pinned, so no upgrade happens behind the declaration's back
    expect(dids(await m.apply(decl([pkg("up", "mesh-test-up", "1.0-1")])))).toEqual(["up:unchanged"]);
    const r = await m.apply(decl([pkg("up", "mesh-test-up", "1.1")]));
    expect(dids(r)).toEqual(["up:updated"]);
    expect((await p.installed())["mesh-test-up"]).toBe("1.1-1");
    // still the mesh's: it was not installed when first touched
    await m.apply(nothing);
    expect((await p.installed())["mesh-test-up"]).toBeUndefined();
  });

  it("a package whose install failed is not said removed when undeclared: the report says nothing was", async () => {
    // the built executable, with this root's pacman on its PATH
    const files = tempDir("mesh-decl-");
    const m = seaMachine({
      exec: hostExec,
      bin: ensureSea(),
      root: p.root,
      state: tempDir("mesh-arch-state-"),
      here: files,
      there: files,
      env: { PATH: p.path },
    });
    const failed = await m.apply(decl([pkg("never", "mesh-test-hello", "9.9-1")]));
    expect(failed.exit).toBe(1);
    expect(dids(failed)).toEqual(["never:failed"]);
    const gone = await m.apply(nothing);
    expect(gone.exit, gone.stderr).toBe(0);
    expect(dids(gone)).toEqual(["never:unchanged"]);
    expect(detailOf(gone, "never")).toBe(
      "mesh-test-hello is not installed (its install did not complete, or it was removed since): nothing was removed",
    );
    // and one the mesh did install is said removed, and is
    expect(dids(await m.apply(decl([pkg("hello", "mesh-test-hello")])))).toEqual(["hello:created"]);
    const removed = await m.apply(nothing);
    expect(dids(removed)).toEqual(["hello:removed"]);
    expect(detailOf(removed, "hello")).toBe("mesh-test-hello 1.0-1 removed (the mesh installed it)");
    expect((await p.installed())["mesh-test-hello"]).toBeUndefined();
  });

  it("a failed package does not stop the apply: what follows it is still applied, and the report says failed", async () => {
    const m = fresh();
    const after = { id: "after", type: "file", path: "/srv/after-a-failed-package", content: "x\n" };
    const r = await m.apply(decl([pkg("v", "mesh-test-hello", "9.9-1"), after, pkg("lib", "mesh-test-lib")]));
    expect(r.exit).toBe(1);
    expect(r.report.outcome).toBe("failed");
    expect(dids(r)).toEqual(["v:failed", "after:created", "lib:created"]);
    expect(readFileSync(join(p.root, "srv/after-a-failed-package"), "utf8")).toBe("x\n");
    expect((await p.installed())["mesh-test-lib"]).toBe("1.0-1");
    await m.apply(nothing);
  });

  it("a removal pacman refuses is reported in pacman's words, and the record kept to try again", async () => {
    const m = fresh();
    await m.apply(decl([pkg("lib", "mesh-test-lib")]));
    expect((await p.exec.run(["pacman", "-S", "--noconfirm", "mesh-test-app"])).code).toBe(0);
    const r = await m.apply(nothing);
    expect(dids(r)).toEqual(["lib:failed"]);
    expect(detailOf(r, "lib")).toContain(
      "removing mesh-test-lib breaks dependency 'mesh-test-lib' required by mesh-test-app",
    );
    expect(m.records().lib).toBeDefined();
    expect((await p.exec.run(["pacman", "-R", "--noconfirm", "mesh-test-app"])).code).toBe(0);
    expect(dids(await m.apply(nothing))).toEqual(["lib:removed"]);
  });

  it.each(["../x", "/usr/bin/x", "a/b", ".hidden", "-rf", "Caps"])(
    "a package name %j is refused on arrival, naming the field",
    (name) => {
      const r = parseDeclaration(decl([pkg("bad", name)]), archHost().support);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.refusals).toEqual([expect.objectContaining({ id: "bad", field: "name" })]);
    },
  );

  it("a records file naming a path is refused at removal, and nothing is removed", async () => {
    const m = fresh();
    m.writeRecords({ evil: { type: "package", name: "../../x", found: { installed: false } } });
    const r = await m.apply(nothing);
    expect(r.exit).not.toBe(0);
    expect(JSON.stringify(r.report)).toContain("names package");
  });
});

describe("package on an adopted node", () => {
  const adopted = (resources: unknown[]) => decl(resources, { mode: "adopted" });
  const adoptedNothing = decl([], { mode: "adopted", owns_nothing: true });

  it("another version found installed is held until takes: true installs the declared one", async () => {
    const m = fresh();
    expect((await p.exec.run(["pacman", "-S", "--noconfirm", "mesh-test-adopt"])).code).toBe(0);
    await p.publish({ name: "mesh-test-adopt", version: "1.1-1" });
    const d = adopted([pkg("ad", "mesh-test-adopt", "1.1-1")]);
    const plan = await m.apply(d, { dryRun: true });
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["ad:unchanged"]);
    expect(plan.plan.map((s) => `${s.id}:${s.did}:${s.detail}`)).toEqual(
      r.report.steps.map((s) => `${s.id}:${s.did}:${s.detail}`),
    );
    expect(detailOf(r, "ad")).toBe(
      "mesh-test-adopt 1.0-1 held: found installed on this adopted node (takes: true installs 1.1-1)",
    );
    expect((await p.installed())["mesh-test-adopt"]).toBe("1.0-1");
    expect(m.records().ad).toEqual({
      type: "package",
      name: "mesh-test-adopt",
      found: { installed: true, version: "1.0-1" },
      held: true,
    });
    expect(dids(await m.apply(d))).toEqual(["ad:unchanged"]);

    const taken = await m.apply(adopted([{ ...pkg("ad", "mesh-test-adopt", "1.1-1"), takes: true }]));
    expect(dids(taken)).toEqual(["ad:updated"]);
    expect(detailOf(taken, "ad")).toContain("read back mesh-test-adopt 1.1-1");
    expect((await p.installed())["mesh-test-adopt"]).toBe("1.1-1");
    const record = m.records().ad as Record<string, unknown>;
    expect(record.held).toBeUndefined();
    expect(record.found).toEqual({ installed: true, version: "1.0-1" });

    // found installed, so it stays installed when undeclared
    const gone = await m.apply(adoptedNothing);
    expect(dids(gone)).toEqual(["ad:unchanged"]);
    expect(detailOf(gone, "ad")).toContain("left installed: it was found installed (1.0-1)");
    expect((await p.installed())["mesh-test-adopt"]).toBe("1.1-1");
  });

  it("found installed and first declared without a version, a later version is held all the same", async () => {
    const m = fresh();
    expect((await p.exec.run(["pacman", "-S", "--noconfirm", "mesh-test-aside"])).code).toBe(0);
    expect(dids(await m.apply(adopted([pkg("as", "mesh-test-aside")])))).toEqual(["as:unchanged"]);
    await p.publish({ name: "mesh-test-aside", version: "1.1-1" });
    const r = await m.apply(adopted([pkg("as", "mesh-test-aside", "1.1-1")]));
    expect(dids(r)).toEqual(["as:unchanged"]);
    expect(detailOf(r, "as")).toContain("held");
    expect((await p.installed())["mesh-test-aside"]).toBe("1.0-1");
  });

  it("converged, the same mismatch is installed as declared", async () => {
    const m = fresh();
    await p.publish({ name: "mesh-test-conv", version: "1.0-1" });
    expect((await p.exec.run(["pacman", "-S", "--noconfirm", "mesh-test-conv"])).code).toBe(0);
    await p.publish({ name: "mesh-test-conv", version: "1.1-1" });
    const r = await m.apply(decl([pkg("cv", "mesh-test-conv", "1.1-1")]));
    expect(dids(r)).toEqual(["cv:updated"]);
    expect((await p.installed())["mesh-test-conv"]).toBe("1.1-1");
  });
});
