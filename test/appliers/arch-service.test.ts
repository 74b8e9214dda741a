// service against a real systemd (PID 1 of a container): absence is not "stopped", a written unit is read
// after the reload that loads it, and undeclaring gives back what was found instead of stopping it.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { showUnit, type UnitState } from "../../src/system/arch/index.ts";
import { parseDeclaration } from "../../src/vocabulary/index.ts";
import { decl } from "../support/offline.ts";
import {
  type ArchMachine,
  archHost,
  type Container,
  containerForFile,
  detailOf,
  dids,
  freshArchMachine,
  seaInContainer,
} from "../support/systemd.ts";

let c: Container;
containerForFile((booted) => {
  c = booted;
});

const fresh = (): ArchMachine => freshArchMachine(c.root, c.exec);
const nothing = decl([], { owns_nothing: true });
const unitFile = (description: string, extra = "") =>
  `[Unit]\nDescription=${description}\n\n[Service]\nExecStart=/bin/sleep infinity\n${extra}\n[Install]\nWantedBy=multi-user.target\n`;
const unitAt = (unit: string) => join(c.root, "etc/systemd/system", unit);

/** A unit the machine had before the mesh: written, loaded, and (if asked) enabled and started by hand. */
async function plant(unit: string, content: string, ...verbs: string[]): Promise<void> {
  writeFileSync(unitAt(unit), content);
  expect((await c.systemctl("daemon-reload")).code).toBe(0);
  for (const verb of verbs) expect((await c.systemctl(verb, unit)).code).toBe(0);
}

async function state(unit: string): Promise<UnitState> {
  const s = await showUnit(c.exec, unit);
  if (typeof s === "string") throw new Error(s);
  return s;
}

async function prop(unit: string, name: string): Promise<string> {
  return (await c.systemctl("show", "-p", name, "--value", unit)).stdout.trim();
}

describe("service: reading a unit", () => {
  it("a unit that does not exist is absent, never 'stopped', and nothing records it as found stopped", async () => {
    const m = fresh();
    const d = decl([{ id: "ghost", type: "service", unit: "mesh-ghost.service", state: "stopped" }]);
    const plan = await m.apply(d, { dryRun: true });
    expect(plan.plan.map((s) => s.did)).toEqual(["failed"]);
    const r = await m.apply(d);
    expect(r.exit).toBe(1);
    expect(dids(r)).toEqual(["ghost:failed"]);
    expect(detailOf(r, "ghost")).toContain("LoadState=not-found");
    expect(detailOf(r, "ghost")).toContain("not stopped");
    expect(m.records().ghost).toBeUndefined();
  });

  it("writes the unit file, reloads, then reads it: a changed file is what systemd runs", async () => {
    const m = fresh();
    const svc = (v: string) =>
      decl([
        {
          id: "web",
          type: "service",
          unit: "mesh-web.service",
          enabled: true,
          state: "running",
          content: unitFile(`mesh web ${v}`),
        },
      ]);
    const first = await m.apply(svc("v1"));
    expect(dids(first)).toEqual(["web:created"]);
    expect(readFileSync(unitAt("mesh-web.service"), "utf8")).toContain("mesh web v1");
    const s1 = await state("mesh-web.service");
    expect([s1.load, s1.file, s1.active]).toEqual(["loaded", "enabled", "active"]);
    expect(m.records().web).toMatchObject({ found: { load: "not-found" }, file: { created: true } });

    const second = await m.apply(svc("v2"));
    expect(dids(second)).toEqual(["web:updated"]);
    expect(detailOf(second, "web")).toMatch(/write .*daemon-reload, restart/);
    // read after the reload: systemd has the new file, and the running unit was restarted onto it
    expect(await prop("mesh-web.service", "Description")).toBe("mesh web v2");
    expect(await prop("mesh-web.service", "NeedDaemonReload")).toBe("no");
    expect((await state("mesh-web.service")).invocation).not.toBe(s1.invocation);

    expect(dids(await m.apply(svc("v2")))).toEqual(["web:unchanged"]);
  });

  it("puts back a unit stopped by hand and says repaired", async () => {
    const m = fresh();
    const d = decl([
      { id: "rep", type: "service", unit: "mesh-rep.service", state: "running", content: unitFile("rep") },
    ]);
    await m.apply(d);
    await c.systemctl("stop", "mesh-rep.service");
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["rep:repaired"]);
    expect((await state("mesh-rep.service")).active).toBe("active");
  });

  it("restart_on restarts the unit when a named resource changed in this apply, and only then", async () => {
    const m = fresh();
    mkdirSync(join(c.root, "etc/mesh-test"), { recursive: true });
    const d = (conf: string) =>
      decl([
        { id: "conf", type: "file", path: "/etc/mesh-test/ro.conf", content: conf },
        {
          id: "ro",
          type: "service",
          unit: "mesh-ro.service",
          state: "running",
          restart_on: ["conf"],
          content: unitFile("ro"),
        },
      ]);
    expect(dids(await m.apply(d("a\n")))).toEqual(["conf:created", "ro:created"]);
    const before = (await state("mesh-ro.service")).invocation;
    expect(dids(await m.apply(d("a\n")))).toEqual(["conf:unchanged", "ro:unchanged"]);
    expect((await state("mesh-ro.service")).invocation).toBe(before);
    const changed = await m.apply(d("b\n"));
    expect(dids(changed)).toEqual(["conf:updated", "ro:updated"]);
    expect(detailOf(changed, "ro")).toContain("restart (conf changed)");
    expect((await state("mesh-ro.service")).invocation).not.toBe(before);
  });

  it("the plan says what the apply does, step for step", async () => {
    const m = fresh();
    await plant("mesh-pl.service", unitFile("pl"));
    const d = decl([
      { id: "pl", type: "service", unit: "mesh-pl.service", enabled: true, state: "running" },
      { id: "pw", type: "service", unit: "mesh-pw.service", state: "running", content: unitFile("pw") },
    ]);
    const plan = await m.apply(d, { dryRun: true });
    expect((await state("mesh-pl.service")).active).toBe("inactive");
    expect(existsSync(unitAt("mesh-pw.service"))).toBe(false);
    const applied = await m.apply(d);
    expect(plan.plan.map((s) => `${s.id}:${s.did}`)).toEqual(dids(applied));
    expect(dids(applied)).toEqual(["pl:updated", "pw:created"]);
  });
});

describe("service: undeclared, given back as found", () => {
  it("found running stays running (and enabled)", async () => {
    const m = fresh();
    await plant("mesh-fa.service", unitFile("fa"), "enable", "start");
    const r = await m.apply(
      decl([{ id: "fa", type: "service", unit: "mesh-fa.service", enabled: true, state: "running" }]),
    );
    expect(dids(r)).toEqual(["fa:unchanged"]);
    expect(m.records().fa).toMatchObject({ found: { load: "loaded", enabled: "enabled", active: "active" } });
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["fa:unchanged"]);
    expect(detailOf(gone, "fa")).toContain("left running, as found");
    const s = await state("mesh-fa.service");
    expect([s.file, s.active]).toEqual(["enabled", "active"]);
    expect(m.records().fa).toBeUndefined();
  });

  it("started (and enabled) by the mesh is stopped (and disabled) again; the found file stays", async () => {
    const m = fresh();
    await plant("mesh-fb.service", unitFile("fb"));
    await m.apply(
      decl([{ id: "fb", type: "service", unit: "mesh-fb.service", enabled: true, state: "running" }]),
    );
    expect((await state("mesh-fb.service")).active).toBe("active");
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["fb:restored"]);
    expect(detailOf(gone, "fb")).toMatch(/stopped, disabled/);
    const s = await state("mesh-fb.service");
    expect([s.load, s.file, s.active]).toEqual(["loaded", "disabled", "inactive"]);
    expect(existsSync(unitAt("mesh-fb.service"))).toBe(true);
  });

  it("enabled and state first declared in a later apply: what was found then is recorded and given back (issue 27, item 18)", async () => {
    const m = fresh();
    await plant("mesh-fl.service", unitFile("fl"));
    // first declared with neither: nothing of its state is the mesh's yet
    const first = await m.apply(decl([{ id: "fl", type: "service", unit: "mesh-fl.service" }]));
    expect(first.exit, JSON.stringify(first.report.steps)).toBe(0);
    expect((await state("mesh-fl.service")).active).toBe("inactive");
    const later = await m.apply(
      decl([{ id: "fl", type: "service", unit: "mesh-fl.service", enabled: true, state: "running" }]),
    );
    expect(later.exit, JSON.stringify(later.report.steps)).toBe(0);
    expect(m.records().fl).toMatchObject({ found: { enabled: "disabled", active: "inactive" } });
    expect((await state("mesh-fl.service")).active).toBe("active");
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["fl:restored"]);
    const s = await state("mesh-fl.service");
    expect([s.file, s.active]).toEqual(["disabled", "inactive"]);
  });

  it("nothing is started on the way out: found running, stopped by the mesh, stays stopped", async () => {
    const m = fresh();
    await plant("mesh-fc.service", unitFile("fc"), "start");
    await m.apply(decl([{ id: "fc", type: "service", unit: "mesh-fc.service", state: "stopped" }]));
    expect((await state("mesh-fc.service")).active).toBe("inactive");
    const gone = await m.apply(nothing);
    expect(detailOf(gone, "fc")).toContain("nothing is started on the way out");
    expect((await state("mesh-fc.service")).active).toBe("inactive");
  });

  it("a unit whose file the mesh created is the mesh's, whatever the record says of what was found", async () => {
    const m = fresh();
    const d = (id: string, unit: string) => ({
      id,
      type: "service",
      unit,
      enabled: true,
      state: "running",
      content: unitFile(id),
    });
    await m.apply(decl([d("own", "mesh-own.service"), d("old", "mesh-old.service")]));
    // a record claiming the unit was found running, and one written before Found existed
    const records = m.records();
    records.own = { ...records.own!, found: { load: "loaded", enabled: "enabled", active: "active" } };
    records.old = { type: "service", unit: "mesh-old.service", file: { created: true, wrote: "" } };
    m.writeRecords(records);
    const gone = await m.apply(nothing);
    expect(dids(gone).sort()).toEqual(["old:removed", "own:removed"]);
    for (const unit of ["mesh-own.service", "mesh-old.service"]) {
      const s = await state(unit);
      expect([s.load, s.active]).toEqual(["not-found", "inactive"]);
      expect(existsSync(unitAt(unit))).toBe(false);
      expect(existsSync(join(c.root, "etc/systemd/system/multi-user.target.wants", unit))).toBe(false);
    }
    expect(detailOf(gone, "own")).toContain("is the mesh's");
  });

  it("a record written before Found existed leaves the unit alone", async () => {
    const m = fresh();
    await plant("mesh-pre.service", unitFile("pre"), "enable", "start");
    m.writeRecords({ pre: { type: "service", unit: "mesh-pre.service" } });
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["pre:unchanged"]);
    expect(detailOf(gone, "pre")).toContain("left alone");
    const s = await state("mesh-pre.service");
    expect([s.file, s.active]).toEqual(["enabled", "active"]);
  });

  it("found is kept the moment it is read: a first apply that enabled and then failed is not the machine's", async () => {
    const m = fresh();
    await plant(
      "mesh-ff.service",
      "[Service]\nType=oneshot\nExecStart=/bin/false\n[Install]\nWantedBy=multi-user.target\n",
    );
    const d = decl([{ id: "ff", type: "service", unit: "mesh-ff.service", enabled: true, state: "running" }]);
    const first = await m.apply(d);
    expect(dids(first)).toEqual(["ff:failed"]);
    expect(detailOf(first, "ff")).toContain("systemctl start");
    expect((await state("mesh-ff.service")).file).toBe("enabled");
    expect(m.records().ff).toMatchObject({ found: { enabled: "disabled", active: "inactive" } });
    // a second apply finds it enabled, by the mesh's own doing: that is not what was found
    expect(dids(await m.apply(d))).toEqual(["ff:failed"]);
    expect(m.records().ff).toMatchObject({ found: { enabled: "disabled" } });
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["ff:restored"]);
    expect((await state("mesh-ff.service")).file).toBe("disabled");
  });

  it("a found unit file the mesh wrote over is held, and given back (reloaded) when undeclared", async () => {
    const m = fresh();
    await plant("mesh-held.service", unitFile("the original"), "start");
    const r = await m.apply(
      decl([
        {
          id: "h",
          type: "service",
          unit: "mesh-held.service",
          state: "running",
          content: unitFile("the mesh's"),
        },
      ]),
    );
    expect(dids(r)).toEqual(["h:updated"]);
    expect(detailOf(r, "h")).toContain("the original held");
    expect(await prop("mesh-held.service", "Description")).toBe("the mesh's");
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["h:restored"]);
    expect(readFileSync(unitAt("mesh-held.service"), "utf8")).toBe(unitFile("the original"));
    expect(await prop("mesh-held.service", "Description")).toBe("the original");
    expect((await state("mesh-held.service")).active).toBe("active");
  });

  it("moved to another unit: the old one is given back, the new one found afresh", async () => {
    const m = fresh();
    await m.apply(
      decl([
        { id: "mv", type: "service", unit: "mesh-mv1.service", state: "running", content: unitFile("mv1") },
      ]),
    );
    await plant("mesh-mv2.service", unitFile("mv2"));
    const r = await m.apply(
      decl([{ id: "mv", type: "service", unit: "mesh-mv2.service", state: "running" }]),
    );
    expect(dids(r)).toEqual(["mv:updated"]);
    expect((await state("mesh-mv1.service")).load).toBe("not-found");
    expect(m.records().mv).toMatchObject({
      unit: "mesh-mv2.service",
      found: { load: "loaded", active: "inactive" },
    });
    await m.apply(nothing);
    expect((await state("mesh-mv2.service")).active).toBe("inactive");
  });
});

describe("service on an adopted node", () => {
  const adopted = (resources: unknown[]) => decl(resources, { mode: "adopted" });
  const adoptedNothing = decl([], { mode: "adopted", owns_nothing: true });
  const svc = (id: string, unit: string, extra: Record<string, unknown> = {}) => ({
    id,
    type: "service",
    unit,
    ...extra,
  });

  it("a unit found running is held: nothing written, nothing run, and left as found when undeclared", async () => {
    const m = fresh();
    await plant("mesh-ah.service", unitFile("ah found"), "enable", "start");
    const before = await state("mesh-ah.service");
    const d = adopted([
      svc("ah", "mesh-ah.service", { enabled: false, state: "stopped", content: unitFile("ah mesh") }),
    ]);
    const plan = await m.apply(d, { dryRun: true });
    expect(plan.plan.map((s) => `${s.id}:${s.did}`)).toEqual(["ah:unchanged"]);
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["ah:unchanged"]);
    expect(detailOf(r, "ah")).toBe(
      "mesh-ah.service held: found running on this adopted node (takes: true makes it the mesh's)",
    );
    expect(plan.plan[0]!.detail).toBe(detailOf(r, "ah"));
    expect(m.records().ah).toEqual({
      type: "service",
      unit: "mesh-ah.service",
      held: true,
      found: { load: "loaded", enabled: "enabled", active: "active" },
    });
    // held again on the next apply, whatever the declaration says
    expect(dids(await m.apply(d))).toEqual(["ah:unchanged"]);
    const held = await state("mesh-ah.service");
    expect([held.invocation, held.active, held.file]).toEqual([before.invocation, "active", "enabled"]);
    expect(readFileSync(unitAt("mesh-ah.service"), "utf8")).toBe(unitFile("ah found"));

    const gone = await m.apply(adoptedNothing);
    expect(dids(gone)).toEqual(["ah:unchanged"]);
    expect(detailOf(gone, "ah")).toBe("mesh-ah.service left as it was found: it was held, never the mesh's");
    expect(m.records().ah).toBeUndefined();
    expect((await state("mesh-ah.service")).invocation).toBe(before.invocation);
    expect(readFileSync(unitAt("mesh-ah.service"), "utf8")).toBe(unitFile("ah found"));
  });

  it("takes: true makes a held unit the mesh's, with what was found when held, and gives that back", async () => {
    const m = fresh();
    await plant("mesh-at.service", unitFile("at found"), "enable", "start");
    const before = await state("mesh-at.service");
    const want = (extra: Record<string, unknown>) =>
      adopted([svc("at", "mesh-at.service", { state: "running", content: unitFile("at mesh"), ...extra })]);
    expect(dids(await m.apply(want({})))).toEqual(["at:unchanged"]);
    expect(m.records().at).toMatchObject({ held: true });

    const taken = await m.apply(want({ takes: true }));
    expect(dids(taken)).toEqual(["at:updated"]);
    expect(detailOf(taken, "at")).toContain("the original held");
    expect(detailOf(taken, "at")).toContain("restart");
    expect(detailOf(taken, "at")).toContain("found loaded, enabled, active");
    expect(await prop("mesh-at.service", "Description")).toBe("at mesh");
    const s = await state("mesh-at.service");
    expect(s.active).toBe("active");
    expect(s.invocation).not.toBe(before.invocation);
    const record = m.records().at as Record<string, unknown>;
    expect(record.held).toBeUndefined();
    expect(record.found).toEqual({ load: "loaded", enabled: "enabled", active: "active" });
    expect(dids(await m.apply(want({ takes: true })))).toEqual(["at:unchanged"]);

    const gone = await m.apply(adoptedNothing);
    expect(dids(gone)).toEqual(["at:restored"]);
    expect(readFileSync(unitAt("mesh-at.service"), "utf8")).toBe(unitFile("at found"));
    expect(await prop("mesh-at.service", "Description")).toBe("at found");
    const back = await state("mesh-at.service");
    expect([back.file, back.active]).toEqual(["enabled", "active"]);
  });

  it("takes: true stops a held unit declared stopped, and the way out starts nothing", async () => {
    const m = fresh();
    await plant("mesh-ap.service", unitFile("ap"), "start");
    const d = (takes: boolean) => adopted([svc("ap", "mesh-ap.service", { state: "stopped", takes })]);
    expect(dids(await m.apply(d(false)))).toEqual(["ap:unchanged"]);
    expect((await state("mesh-ap.service")).active).toBe("active");
    const taken = await m.apply(d(true));
    expect(dids(taken)).toEqual(["ap:updated"]);
    expect(detailOf(taken, "ap")).toContain("mesh-ap.service: stop");
    expect((await state("mesh-ap.service")).active).toBe("inactive");
    const gone = await m.apply(adoptedNothing);
    expect(detailOf(gone, "ap")).toContain("nothing is started on the way out");
    expect((await state("mesh-ap.service")).active).toBe("inactive");
  });

  it("a unit found stopped is not held: it is started as declared, and stopped again when undeclared", async () => {
    const m = fresh();
    await plant("mesh-as.service", unitFile("as"));
    const r = await m.apply(adopted([svc("as", "mesh-as.service", { state: "running" })]));
    expect(dids(r)).toEqual(["as:updated"]);
    expect((await state("mesh-as.service")).active).toBe("active");
    const record = m.records().as as Record<string, unknown>;
    expect(record.held).toBeUndefined();
    expect(record.found).toMatchObject({ load: "loaded", active: "inactive" });
    const gone = await m.apply(adoptedNothing);
    expect(dids(gone)).toEqual(["as:restored"]);
    expect((await state("mesh-as.service")).active).toBe("inactive");
  });

  it("an id moved off a held unit leaves that unit as found", async () => {
    const m = fresh();
    await plant("mesh-am1.service", unitFile("am1"), "start");
    const before = await state("mesh-am1.service");
    expect(dids(await m.apply(adopted([svc("am", "mesh-am1.service", { state: "stopped" })])))).toEqual([
      "am:unchanged",
    ]);
    const d = adopted([svc("am", "mesh-am2.service", { state: "running", content: unitFile("am2") })]);
    const plan = await m.apply(d, { dryRun: true });
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["am:created"]);
    expect(plan.plan.map((s) => `${s.id}:${s.did}`)).toEqual(dids(r));
    expect(detailOf(r, "am")).toContain(
      "mesh-am1.service left as it was found: it was held, never the mesh's",
    );
    expect((await state("mesh-am1.service")).invocation).toBe(before.invocation);
    expect((await state("mesh-am2.service")).active).toBe("active");
    expect(m.records().am).toMatchObject({ unit: "mesh-am2.service", file: { created: true } });
    await m.apply(adoptedNothing);
    expect((await state("mesh-am2.service")).load).toBe("not-found");
    expect((await state("mesh-am1.service")).invocation).toBe(before.invocation);
  });

  it("an id moved off the mesh's unit onto one found running gives the old one back and holds the new", async () => {
    const m = fresh();
    await m.apply(adopted([svc("an", "mesh-an1.service", { state: "running", content: unitFile("an1") })]));
    expect((await state("mesh-an1.service")).active).toBe("active");
    await plant("mesh-an2.service", unitFile("an2"), "start");
    const before = await state("mesh-an2.service");
    const d = adopted([svc("an", "mesh-an2.service", { state: "stopped" })]);
    const plan = await m.apply(d, { dryRun: true });
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["an:updated"]);
    expect(plan.plan.map((s) => `${s.id}:${s.did}:${s.detail}`)).toEqual(
      r.report.steps.map((s) => `${s.id}:${s.did}:${s.detail}`),
    );
    expect(detailOf(r, "an")).toMatch(/mesh-an1.service is the mesh's.*; then mesh-an2.service held/);
    expect((await state("mesh-an1.service")).load).toBe("not-found");
    expect((await state("mesh-an2.service")).invocation).toBe(before.invocation);
    expect(m.records().an).toMatchObject({ unit: "mesh-an2.service", held: true });
  });

  it("the plan says what the apply does, step for step: a held unit, a taken unit and a file", async () => {
    const m = fresh();
    mkdirSync(join(c.root, "etc/mesh-test"), { recursive: true });
    await plant("mesh-ph.service", unitFile("ph"), "start");
    await plant("mesh-pt.service", unitFile("pt"), "start");
    const held = (await state("mesh-ph.service")).invocation;
    const d = adopted([
      { id: "conf", type: "file", path: "/etc/mesh-test/adopted.conf", content: "a\n" },
      svc("ph", "mesh-ph.service", { state: "running", restart_on: ["conf"] }),
      svc("pt", "mesh-pt.service", { state: "running", restart_on: ["conf"], takes: true }),
    ]);
    const plan = await m.apply(d, { dryRun: true });
    expect(existsSync(join(c.root, "etc/mesh-test/adopted.conf"))).toBe(false);
    const applied = await m.apply(d);
    expect(applied.exit).toBe(0);
    const lines = (steps: { id: string; did: string; detail: string }[]) =>
      steps.map((s) => `${s.id}:${s.did}:${s.detail}`);
    // an apply's detail adds what it read back to what the plan said
    expect(plan.plan.map((s) => `${s.id}:${s.did}`)).toEqual(dids(applied));
    applied.report.steps.forEach((s, i) => {
      expect(s.detail.startsWith(plan.plan[i]!.detail)).toBe(true);
    });
    expect(lines(plan.plan).filter((l) => l.startsWith("ph:"))).toEqual(
      lines(applied.report.steps).filter((l) => l.startsWith("ph:")),
    );
    expect(dids(applied)).toEqual(["conf:created", "ph:unchanged", "pt:updated"]);
    expect(detailOf(applied, "ph")).toContain("held");
    expect(detailOf(applied, "pt")).toContain("restart (conf changed)");
    expect((await state("mesh-ph.service")).invocation).toBe(held);
  });
});

describe("service: what systemd would refuse never replaces a working unit", () => {
  it("new content is verified by systemd before the swap: refused, the working file stays and keeps running", async () => {
    const m = seaInContainer(c);
    const svc = (content: string) =>
      decl([{ id: "v", type: "service", unit: "mesh-verified.service", state: "running", content }]);
    expect(dids(await m.apply(svc(unitFile("mesh verified"))))).toEqual(["v:created"]);
    const before = await state("mesh-verified.service");
    const bad = unitFile("mesh verified v2").replace("/bin/sleep infinity", "relative/sleep infinity");
    const r = await m.apply(svc(bad));
    expect(r.exit).toBe(1);
    expect(dids(r)).toEqual(["v:failed"]);
    expect(detailOf(r, "v")).toContain(
      "systemd refuses mesh-verified.service: /etc/systemd/system/mesh-verified.service:5: Neither a valid executable name nor an absolute path: relative/sleep",
    );
    expect(detailOf(r, "v")).toContain("the unit file was not replaced");
    expect(readFileSync(unitAt("mesh-verified.service"), "utf8")).toBe(unitFile("mesh verified"));
    const after = await state("mesh-verified.service");
    expect([after.load, after.active, after.invocation]).toEqual(["loaded", "active", before.invocation]);
    // nothing of the scratch directory is left in the root
    expect(readdirSync(join(c.root, "var/tmp")).filter((n) => n.startsWith("mesh-host-verify-"))).toEqual([]);
  });
});

describe("service: a failed service does not stop the apply; a failed action does", () => {
  it("the steps after a failed service still run, and the report says failed; after a failed action nothing runs", async () => {
    const m = fresh();
    const good = {
      id: "good",
      type: "service",
      unit: "mesh-after.service",
      state: "running",
      content: unitFile("after"),
    };
    const ghost = { id: "ghost", type: "service", unit: "mesh-ghost2.service", state: "running" };
    const r = await m.apply(decl([ghost, good]));
    expect(r.exit).toBe(1);
    expect(r.report.outcome).toBe("failed");
    expect(dids(r)).toEqual(["ghost:failed", "good:created"]);
    expect((await state("mesh-after.service")).active).toBe("active");
    const boom = { id: "boom", type: "action", run: ["sh", "-c", "exit 3"] };
    const stopped = await m.apply(decl([boom, { ...good, state: "stopped" }]));
    expect(dids(stopped)).toEqual(["boom:failed", "good:not-reached"]);
    expect(detailOf(stopped, "good")).toBe("not reached: action boom failed");
    expect((await state("mesh-after.service")).active).toBe("active");
    await m.apply(nothing);
  });
});

describe("service: template units, by systemd's own unit-name grammar", () => {
  it("an instance of a template is declared, enabled and started, and given back when undeclared", async () => {
    await plant("mesh-tmpl@.service", unitFile("mesh template %i"));
    const m = seaInContainer(c);
    const d = decl([
      { id: "one", type: "service", unit: "mesh-tmpl@one.service", enabled: true, state: "running" },
    ]);
    const r = await m.apply(d);
    expect(r.exit, r.stderr).toBe(0);
    expect(dids(r)).toEqual(["one:updated"]);
    expect(await prop("mesh-tmpl@one.service", "Description")).toBe("mesh template one");
    expect(await state("mesh-tmpl@one.service")).toMatchObject({ active: "active", file: "enabled" });
    const gone = await m.apply(nothing);
    expect(dids(gone)).toEqual(["one:restored"]);
    expect(await state("mesh-tmpl@one.service")).toMatchObject({ active: "inactive", file: "disabled" });
  });

  it.each([
    "getty@tty1.service",
    "wg-quick@wg0.service",
    "NetworkManager.service",
    "systemd-fsck@dev-disk-by\\x2duuid-1.service",
  ])("takes unit %j on arrival", (unit) => {
    const r = parseDeclaration(decl([{ id: "s", type: "service", unit }]), archHost().support);
    expect(r.ok, JSON.stringify(r)).toBe(true);
  });

  it("every name that forms a path keeps the one rule: a process name or an id with @ is refused", () => {
    for (const r of [
      { id: "p", type: "process", name: "web@1", exec: ["/bin/true"] },
      { id: "a@b", type: "service", unit: "x.service" },
    ]) {
      const parsed = parseDeclaration(decl([r]), archHost().support);
      expect(parsed.ok).toBe(false);
    }
  });
});

describe("service: bad input is refused on arrival, naming the field", () => {
  it.each([
    "../../etc/evil.service",
    "sshd",
    "a b.service",
    "..",
    "x@.service",
    "@x.service",
    "a/b@c.service",
    "x@y@z/w.service",
    `${"a".repeat(250)}.service`,
  ])("unit %j", (unit) => {
    const r = parseDeclaration(decl([{ id: "s", type: "service", unit }]), archHost().support);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.refusals).toEqual([expect.objectContaining({ id: "s", field: "unit" })]);
  });
});
