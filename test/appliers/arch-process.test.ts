// process against a real systemd: a daemon or a timer run from a bundle under /var/lib/mesh/<name>; removed
// whole when undeclared, and a name outside the one rule (".." once deleted /var/lib/mesh) refused both ways.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { processApplier } from "../../src/appliers/arch/process.ts";
import type { DecideContext } from "../../src/appliers/types.ts";
import { State, StoreOriginals } from "../../src/store/index.ts";
import { showUnit, type UnitState } from "../../src/system/arch/index.ts";
import { parseDeclaration } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { decl } from "../support/offline.ts";
import { ensureSea } from "../support/sea.ts";
import {
  type ArchMachine,
  archHost,
  type Container,
  containerForFile,
  detailOf,
  dids,
  freshArchMachine,
  planned,
  seaInContainer,
} from "../support/systemd.ts";
import { tempDir } from "../support/tmp.ts";

let c: Container;
containerForFile((booted) => {
  c = booted;
});

const fresh = (): ArchMachine => freshArchMachine(c.root, c.exec);
const nothing = decl([], { owns_nothing: true });
const at = (path: string) => join(c.root, path);
const RUN = 'printf "%s\\n" "$@" > args.txt\nexec sleep infinity\n';

const proc = (name: string, extra: Record<string, unknown> = {}) => ({
  id: name,
  type: "process",
  name,
  exec: ["/bin/sh", "run.sh"],
  bundle: [{ path: "run.sh", content: RUN, mode: "0755" }],
  ...extra,
});

async function state(unit: string): Promise<UnitState> {
  const s = await showUnit(c.exec, unit);
  if (typeof s === "string") throw new Error(s);
  return s;
}

/** Wait for `what`; `ms` is when to call it missing on a busy machine, not how long it should take. */
async function until(what: () => boolean, ms = EVENT_WAIT_MS): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("process: a daemon run from its bundle", () => {
  it("writes the bundle and the unit, runs it with argv exactly as declared, restarts it when its bundle changes", async () => {
    const m = fresh();
    const args = ["a b", "it's", "$HOME", "100%", "back\\slash", '"q"', "$" + "{X}"];
    const d = (run: string) =>
      decl([
        proc("echoer", {
          exec: ["/bin/sh", "run.sh", ...args],
          bundle: [
            { path: "run.sh", content: run, mode: "0755" },
            { path: "etc/conf", content: "x\n" },
          ],
        }),
      ]);
    const first = await m.apply(d(RUN));
    expect(dids(first)).toEqual(["echoer:created"]);
    expect(statSync(at("var/lib/mesh/echoer/run.sh")).mode & 0o777).toBe(0o755);
    expect(statSync(at("var/lib/mesh/echoer/etc/conf")).mode & 0o777).toBe(0o644);
    const unit = readFileSync(at("etc/systemd/system/mesh-process-echoer.service"), "utf8");
    expect(unit).toContain("Type=exec");
    expect(unit).toContain("WorkingDirectory=/var/lib/mesh/echoer");
    const s = await state("mesh-process-echoer.service");
    expect([s.file, s.active]).toEqual(["enabled", "active"]);
    // every word arrives as declared: no splitting, no $ or % expansion by systemd
    await until(() => existsSync(at("var/lib/mesh/echoer/args.txt")));
    await until(
      () => readFileSync(at("var/lib/mesh/echoer/args.txt"), "utf8").split("\n").length > args.length,
    );
    expect(readFileSync(at("var/lib/mesh/echoer/args.txt"), "utf8")).toBe(`${args.join("\n")}\n`);

    expect(dids(await m.apply(d(RUN)))).toEqual(["echoer:unchanged"]);
    const changed = await m.apply(d(`# v2\n${RUN}`));
    expect(dids(changed)).toEqual(["echoer:updated"]);
    expect(detailOf(changed, "echoer")).toContain("restart mesh-process-echoer.service");
    expect((await state("mesh-process-echoer.service")).invocation).not.toBe(s.invocation);
  });

  it("a program that cannot be run fails the step with systemd's words before its unit is written, and is still removed whole", async () => {
    const m = fresh();
    const r = await m.apply(decl([proc("noprog", { exec: ["/nonexistent/prog"] })]));
    expect(dids(r)).toEqual(["noprog:failed"]);
    expect(detailOf(r, "noprog")).toContain(
      "systemd refuses mesh-process-noprog.service: Command /nonexistent/prog is not executable",
    );
    expect(existsSync(at("etc/systemd/system/mesh-process-noprog.service"))).toBe(false);
    expect(m.records().noprog).toBeDefined();
    expect(dids(await m.apply(nothing))).toEqual(["noprog:removed"]);
    expect(existsSync(at("var/lib/mesh/noprog"))).toBe(false);
  });

  it("undeclared: unit and bundle removed, and the report says what was removed", async () => {
    const m = fresh();
    await m.apply(decl([proc("gone")]));
    const r = await m.apply(nothing);
    expect(dids(r)).toEqual(["gone:removed"]);
    expect(detailOf(r, "gone")).toContain("stopped and disabled mesh-process-gone.service");
    expect(detailOf(r, "gone")).toContain(
      "removed /etc/systemd/system/mesh-process-gone.service, /var/lib/mesh/gone (",
    );
    expect((await state("mesh-process-gone.service")).load).toBe("not-found");
    expect(existsSync(at("var/lib/mesh/gone"))).toBe(false);
    expect(existsSync(at("var/lib/mesh"))).toBe(true);
    expect(existsSync(at("etc/systemd/system/multi-user.target.wants/mesh-process-gone.service"))).toBe(
      false,
    );
  });

  it("renamed under the same id: the old process is removed, the new one made", async () => {
    const m = fresh();
    await m.apply(decl([proc("first")]));
    const r = await m.apply(decl([{ ...proc("second"), id: "first" }]));
    expect(dids(r)).toEqual(["first:updated"]);
    expect((await state("mesh-process-first.service")).load).toBe("not-found");
    expect(existsSync(at("var/lib/mesh/first"))).toBe(false);
    expect((await state("mesh-process-second.service")).active).toBe("active");
    await m.apply(nothing);
    expect(existsSync(at("var/lib/mesh/second"))).toBe(false);
  });
});

describe("process: on a schedule, a timer and a oneshot service", () => {
  it("writes both, starts the timer (not the service), and removes all three when undeclared", async () => {
    const m = fresh();
    const r = await m.apply(
      decl([
        proc("nightly", { schedule: "*-*-* 03:00:00", bundle: [{ path: "run.sh", content: "echo ran\n" }] }),
      ]),
    );
    expect(dids(r)).toEqual(["nightly:created"]);
    const service = readFileSync(at("etc/systemd/system/mesh-process-nightly.service"), "utf8");
    expect(service).toContain("Type=oneshot");
    expect(service).not.toContain("[Install]");
    expect(readFileSync(at("etc/systemd/system/mesh-process-nightly.timer"), "utf8")).toContain(
      "OnCalendar=*-*-* 03:00:00",
    );
    const timer = await state("mesh-process-nightly.timer");
    expect([timer.file, timer.active]).toEqual(["enabled", "active"]);
    const svc = await state("mesh-process-nightly.service");
    expect([svc.file, svc.active]).toEqual(["static", "inactive"]);

    const gone = await m.apply(nothing);
    expect(detailOf(gone, "nightly")).toContain(
      "removed /etc/systemd/system/mesh-process-nightly.service, /etc/systemd/system/mesh-process-nightly.timer, /var/lib/mesh/nightly (1 file)",
    );
    for (const unit of ["mesh-process-nightly.timer", "mesh-process-nightly.service"])
      expect((await state(unit)).load).toBe("not-found");
    expect(existsSync(at("var/lib/mesh/nightly"))).toBe(false);
  });

  it("a daemon turned timer stops being a daemon, and back", async () => {
    const m = fresh();
    await m.apply(decl([proc("turn")]));
    expect((await state("mesh-process-turn.service")).active).toBe("active");
    const timed = await m.apply(decl([proc("turn", { schedule: "hourly" })]));
    expect(dids(timed)).toEqual(["turn:updated"]);
    const svc = await state("mesh-process-turn.service");
    expect([svc.file, svc.active]).toEqual(["static", "inactive"]);
    expect((await state("mesh-process-turn.timer")).active).toBe("active");
    expect(existsSync(at("etc/systemd/system/multi-user.target.wants/mesh-process-turn.service"))).toBe(
      false,
    );
    const back = await m.apply(decl([proc("turn")]));
    expect(dids(back)).toEqual(["turn:updated"]);
    expect((await state("mesh-process-turn.timer")).load).toBe("not-found");
    expect((await state("mesh-process-turn.service")).active).toBe("active");
    await m.apply(nothing);
  });

  it("a schedule systemd rejects is refused before anything is touched, naming the field", async () => {
    const m = fresh();
    const r = await m.apply(decl([proc("badcal", { schedule: "every other tuesday" })]));
    expect(r.exit).toBe(2);
    expect(r.report.refusals).toEqual([
      expect.objectContaining({ id: "badcal", reason: expect.stringContaining("schedule: systemd rejects") }),
    ]);
    expect(existsSync(at("etc/systemd/system/mesh-process-badcal.service"))).toBe(false);
    expect(existsSync(at("var/lib/mesh/badcal"))).toBe(false);
    const parsed = parseDeclaration(
      decl([proc("badcal", { schedule: "every other tuesday" })]),
      archHost().support,
    );
    if (!parsed.ok) throw new Error("refused on arrival");
    const step = await processApplier.decide(parsed.value.resources[0] as never, undefined, context(c.root));
    expect(step).toMatchObject({ did: "failed", action: "refuse", field: "schedule" });
  });
});

describe("process on an adopted node", () => {
  const adopted = (resources: unknown[]) => decl(resources, { mode: "adopted" });
  const adoptedNothing = decl([], { mode: "adopted", owns_nothing: true });
  const FOUND_UNIT = "[Unit]\nDescription=found by hand\n\n[Service]\nExecStart=/bin/sleep infinity\n";

  /** A unit under the process's name, written and started by hand before the mesh came. */
  async function plantRunning(name: string): Promise<UnitState> {
    writeFileSync(at(`etc/systemd/system/mesh-process-${name}.service`), FOUND_UNIT);
    expect((await c.systemctl("daemon-reload")).code).toBe(0);
    expect((await c.systemctl("start", `mesh-process-${name}.service`)).code).toBe(0);
    return state(`mesh-process-${name}.service`);
  }

  it("one found running is held: nothing written, left as found when undeclared, made the mesh's by takes: true", async () => {
    const m = fresh();
    const unit = "mesh-process-aheld.service";
    const before = await plantRunning("aheld");
    const d = adopted([proc("aheld")]);
    const plan = await m.apply(d, { dryRun: true });
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["aheld:unchanged"]);
    expect(plan.plan.map((s) => `${s.id}:${s.did}:${s.detail}`)).toEqual(
      r.report.steps.map((s) => `${s.id}:${s.did}:${s.detail}`),
    );
    expect(detailOf(r, "aheld")).toBe(
      `${unit} held: found running on this adopted node (takes: true makes it the mesh's)`,
    );
    expect(m.records().aheld).toMatchObject({ name: "aheld", held: true, bundle: {} });
    expect(readFileSync(at(`etc/systemd/system/${unit}`), "utf8")).toBe(FOUND_UNIT);
    expect(existsSync(at("var/lib/mesh/aheld"))).toBe(false);
    expect((await state(unit)).invocation).toBe(before.invocation);

    const gone = await m.apply(adoptedNothing);
    expect(dids(gone)).toEqual(["aheld:unchanged"]);
    expect(detailOf(gone, "aheld")).toBe("aheld left as it was found: it was held, never the mesh's");
    expect(m.records().aheld).toBeUndefined();
    expect(readFileSync(at(`etc/systemd/system/${unit}`), "utf8")).toBe(FOUND_UNIT);
    expect((await state(unit)).invocation).toBe(before.invocation);

    expect(dids(await m.apply(d))).toEqual(["aheld:unchanged"]);
    const taken = await m.apply(adopted([proc("aheld", { takes: true })]));
    expect(dids(taken)).toEqual(["aheld:updated"]);
    expect(readFileSync(at(`etc/systemd/system/${unit}`), "utf8")).toContain("Written by mesh-host");
    const s = await state(unit);
    expect([s.file, s.active]).toEqual(["enabled", "active"]);
    expect(s.invocation).not.toBe(before.invocation);
    expect((m.records().aheld as Record<string, unknown>).held).toBeUndefined();
    expect(dids(await m.apply(nothing))).toEqual(["aheld:removed"]);
    expect((await state(unit)).load).toBe("not-found");
  });

  it("one found stopped is not held: it is made and started as declared", async () => {
    const m = fresh();
    writeFileSync(at("etc/systemd/system/mesh-process-astop.service"), FOUND_UNIT);
    expect((await c.systemctl("daemon-reload")).code).toBe(0);
    const r = await m.apply(adopted([proc("astop")]));
    expect(dids(r)).toEqual(["astop:updated"]);
    expect((await state("mesh-process-astop.service")).active).toBe("active");
    expect(dids(await m.apply(adoptedNothing))).toEqual(["astop:removed"]);
  });

  it("renamed off a process of the mesh's onto one found running: the mesh's removed first, the found one held", async () => {
    const m = fresh();
    expect(dids(await m.apply(adopted([proc("amine")])))).toEqual(["amine:created"]);
    expect((await state("mesh-process-amine.service")).active).toBe("active");
    const before = await plantRunning("afound");
    const d = adopted([{ ...proc("afound"), id: "amine" }]);
    const plan = await m.apply(d, { dryRun: true });
    const r = await m.apply(d);
    expect(dids(r)).toEqual(["amine:updated"]);
    expect(plan.plan.map((s) => `${s.id}:${s.did}:${s.detail}`)).toEqual(
      r.report.steps.map((s) => `${s.id}:${s.did}:${s.detail}`),
    );
    expect(detailOf(r, "amine")).toMatch(
      /^stop and disable .*mesh-process-amine\.service.*; then mesh-process-afound\.service held: found running/,
    );
    expect((await state("mesh-process-amine.service")).load).toBe("not-found");
    expect(existsSync(at("var/lib/mesh/amine"))).toBe(false);
    expect((await state("mesh-process-afound.service")).invocation).toBe(before.invocation);
    expect(m.records().amine).toMatchObject({ name: "afound", held: true });
    const gone = await m.apply(adoptedNothing);
    expect(detailOf(gone, "amine")).toBe("afound left as it was found: it was held, never the mesh's");
    expect((await state("mesh-process-afound.service")).invocation).toBe(before.invocation);
  });

  it("renamed off a held process: that one is left as found, the new one made", async () => {
    const m = fresh();
    const before = await plantRunning("aren1");
    expect(dids(await m.apply(adopted([proc("aren1")])))).toEqual(["aren1:unchanged"]);
    const r = await m.apply(adopted([{ ...proc("aren2"), id: "aren1" }]));
    expect(dids(r)).toEqual(["aren1:updated"]);
    expect((await state("mesh-process-aren1.service")).invocation).toBe(before.invocation);
    expect((await state("mesh-process-aren2.service")).active).toBe("active");
    await m.apply(adoptedNothing);
    expect((await state("mesh-process-aren2.service")).load).toBe("not-found");
    expect((await state("mesh-process-aren1.service")).invocation).toBe(before.invocation);
  });
});

/** A context for calling the applier alone, commands run in the container. */
function context(root: string): DecideContext {
  const state = new State(tempDir("mesh-arch-state-"));
  return {
    ports: {
      root,
      exec: c.exec,
      rootless: false,
      log: { info() {}, warn() {}, error() {}, debug() {} },
      originals: new StoreOriginals(state),
    },
    changed: new Set(),
    made: new Set(),
    declaredPaths: new Set(),
    secret: () => new Uint8Array(),
  } as DecideContext;
}

describe("process: the one rule, on arrival and before removal", () => {
  it.each([
    ["name", ".."],
    ["name", "../x"],
    ["name", "a/b"],
    ["name", "Web"],
    ["bundle.0.path", "../escape"],
    ["bundle.0.path", "/etc/passwd"],
    ["bundle.0.path", "a/../../b"],
    ["exec.1", "two\nlines"],
    ["schedule", "daily\nExecStartPre=/bin/evil"],
  ])("refused on arrival: %s %j", (field, value) => {
    const p: Record<string, unknown> = proc("ok");
    if (field === "name") p.name = value;
    if (field === "bundle.0.path") p.bundle = [{ path: value, content: "x" }];
    if (field === "exec.1") p.exec = ["/bin/echo", value];
    if (field === "schedule") p.schedule = value;
    const r = parseDeclaration(decl([p]), archHost().support);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.refusals).toEqual([expect.objectContaining({ id: "ok", field })]);
  });

  it("a records file naming process '..' is refused at removal, and /var/lib/mesh is left whole", async () => {
    const m = fresh();
    await m.apply(decl([proc("dotdot")]));
    mkdirSync(at("var/lib/mesh/other"), { recursive: true });
    writeFileSync(at("var/lib/mesh/other/keep"), "keep\n");
    // the records file edited by hand: the process's name is now ".."
    const records = m.records();
    records.dotdot = { ...records.dotdot!, name: ".." };
    m.writeRecords(records);
    const r = await m.apply(nothing);
    expect(r.exit).not.toBe(0);
    expect(JSON.stringify(r.report)).toContain('the record\'s name \\"..\\"');
    expect(readFileSync(at("var/lib/mesh/other/keep"), "utf8")).toBe("keep\n");
    expect(existsSync(at("var/lib/mesh/dotdot/run.sh"))).toBe(true);

    // and the applier alone: decided as a refusal, executing it removes nothing
    const ctx = context(c.root);
    const step = await processApplier.decideRemoval("dotdot", records.dotdot as never, ctx);
    expect(step).toMatchObject({ did: "failed", action: "refuse", field: "name" });
    const done = await processApplier.execute(step, undefined, records.dotdot as never, ctx);
    expect(done.did).toBe("failed");
    expect(existsSync(at("var/lib/mesh/other/keep"))).toBe(true);
    expect(existsSync(at("var/lib/mesh/dotdot/run.sh"))).toBe(true);
  });

  it("removal never follows a link: a link inside the bundle goes, what it points at stays; a linked bundle is left", async () => {
    const outside = mkdtempSync(join(tmpdir(), "mesh-outside-"));
    try {
      writeFileSync(join(outside, "precious"), "precious\n");
      const m = fresh();
      await m.apply(decl([proc("linky")]));
      symlinkSync(outside, at("var/lib/mesh/linky/escape"));
      const r = await m.apply(nothing);
      expect(dids(r)).toEqual(["linky:removed"]);
      // run.sh, the link, and args.txt once the process has written it
      expect(detailOf(r, "linky")).toMatch(/\/var\/lib\/mesh\/linky \([23] files\)/);
      expect(existsSync(at("var/lib/mesh/linky"))).toBe(false);
      expect(readFileSync(join(outside, "precious"), "utf8")).toBe("precious\n");
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it("a bundle directory turned into a link: planned and applied alike as left, given back, and never failing again", async () => {
    // the built executable on the machine, as an operator runs it
    const m = seaInContainer(c);
    mkdirSync(at("srv/elsewhere"), { recursive: true });
    writeFileSync(at("srv/elsewhere/precious"), "precious\n");
    expect(dids(await m.apply(decl([proc("swapped")])))).toEqual(["swapped:created"]);
    renameSync(at("var/lib/mesh/swapped"), at("var/lib/mesh/swapped.moved"));
    symlinkSync("/srv/elsewhere", at("var/lib/mesh/swapped"));
    const left =
      "/var/lib/mesh/swapped is a symbolic link; it is left, not followed: it is the operator's now";

    const plan = await m.apply(nothing, { dryRun: true });
    expect(planned(plan)).toEqual(["swapped:removed"]);
    expect(plan.plan[0]?.detail).toContain(left);
    const gone = await m.apply(nothing);
    expect(gone.exit, gone.stderr).toBe(0);
    expect(dids(gone)).toEqual(["swapped:removed"]);
    expect(detailOf(gone, "swapped")).toContain("stopped and disabled mesh-process-swapped.service");
    expect(detailOf(gone, "swapped")).toContain("removed /etc/systemd/system/mesh-process-swapped.service");
    expect(detailOf(gone, "swapped")).toContain(left);
    expect((await state("mesh-process-swapped.service")).load).toBe("not-found");
    // given back: the record dropped, the link and what it points at untouched
    expect(m.state.readRecords().records.swapped).toBeUndefined();
    expect(lstatSync(at("var/lib/mesh/swapped")).isSymbolicLink()).toBe(true);
    expect(readFileSync(at("srv/elsewhere/precious"), "utf8")).toBe("precious\n");
    const again = await m.apply(nothing);
    expect(again.exit).toBe(0);
    expect(dids(again)).toEqual([]);
  });
});

describe("process: what systemd would refuse never replaces a working unit", () => {
  it("an exec systemd will not load is refused on arrival, naming it, with nothing written", async () => {
    const m = seaInContainer(c);
    for (const [program, said] of [
      ["relative/x", '"relative/x" is a relative path, which systemd refuses'],
      ["-/bin/true", '"-/bin/true" starts with -, which systemd reads as an ExecStart= prefix'],
      ["/usr/bin/", '"/usr/bin/" names a directory'],
    ] as const) {
      const r = await m.apply(decl([proc("relx", { exec: [program] })]));
      expect(r.exit).toBe(2);
      expect(r.stderr).toContain('resource "relx", field "exec.0"');
      expect(r.stderr).toContain(said);
    }
    expect(existsSync(at("etc/systemd/system/mesh-process-relx.service"))).toBe(false);
    expect(existsSync(at("var/lib/mesh/relx"))).toBe(false);
    // a bare name is systemd's to look up on its own search path, and runs
    const bare = await m.apply(decl([proc("bare", { exec: ["sh", "run.sh"] })]));
    expect(dids(bare), detailOf(bare, "bare")).toEqual(["bare:created"]);
  });

  it("a unit systemd refuses is verified before the swap: the working one keeps running, unchanged", async () => {
    const m = seaInContainer(c);
    expect(dids(await m.apply(decl([proc("verified")])))).toEqual(["verified:created"]);
    const unit = at("etc/systemd/system/mesh-process-verified.service");
    const working = readFileSync(unit, "utf8");
    const before = await state("mesh-process-verified.service");
    // passes arrival (a bare name), but systemd finds no such program
    const r = await m.apply(decl([proc("verified", { exec: ["mesh-no-such-program"] })]));
    expect(r.exit).toBe(1);
    expect(dids(r)).toEqual(["verified:failed"]);
    expect(detailOf(r, "verified")).toContain(
      "systemd refuses mesh-process-verified.service: Command mesh-no-such-program is not executable",
    );
    expect(detailOf(r, "verified")).toContain("nothing was stopped or replaced");
    expect(readFileSync(unit, "utf8")).toBe(working);
    const after = await state("mesh-process-verified.service");
    expect(after.active).toBe("active");
    expect(after.invocation).toBe(before.invocation);
    // the declaration put right, it goes through
    expect(dids(await m.apply(decl([proc("verified")])))).toEqual(["verified:unchanged"]);
  });
});

describe("process: a bundle directory swapped for a link during the apply (issue 18), through the executable", () => {
  it("the bundle's write is refused naming the path; nothing lands where the link points", async () => {
    // the built executable, run inside the container as its own root (`--root /`), systemd answering
    copyFileSync(process.env.MESH_HOST_BIN ?? ensureSea(), at("usr/local/bin/mesh-host"));
    chmodSync(at("usr/local/bin/mesh-host"), 0o755);
    mkdirSync(at("outside"), { mode: 0o700 });
    writeFileSync(at("outside/precious"), "precious\n");
    const run = async (resources: unknown[], extra: Record<string, unknown> = {}) => {
      writeFileSync(at("root/race.json"), JSON.stringify(decl(resources, extra)));
      const argv = ["/usr/local/bin/mesh-host", "apply", "/root/race.json", "--root", "/", "--host", "arch"];
      const r = await c.exec.run([...argv, "--state", "/var/lib/mesh-host-race", "--json"]);
      if (!r.stdout) throw new Error(`mesh-host exited ${r.code ?? r.spawnError}: ${r.stderr}`);
      return { code: r.code, doc: JSON.parse(r.stdout), stderr: r.stderr };
    };
    const first = await run([proc("raced")]);
    expect(first.code, first.stderr).toBe(0);
    const swap = {
      id: "swap",
      type: "action",
      run: [
        "sh",
        "-c",
        "mv /var/lib/mesh/raced /var/lib/mesh/raced.moved && ln -s /outside /var/lib/mesh/raced",
      ],
    };
    const bundle = [
      { path: "run.sh", content: `# v2\n${RUN}`, mode: "0755" },
      { path: "etc/conf", content: "x\n" },
    ];
    const second = await run([swap, proc("raced", { bundle })]);
    expect(second.code, second.stderr).toBe(1);
    const step = second.doc.report.steps.find((s: { id: string }) => s.id === "raced");
    expect(step.did).toBe("failed");
    expect(step.detail).toContain("(/var/lib/mesh/raced) is a symbolic link; it is not followed");
    expect(readdirSync(at("outside"))).toEqual(["precious"]);
    expect(statSync(at("outside")).mode & 0o777).toBe(0o700);
    // put back as it was, and the process removed through the same executable
    rmSync(at("var/lib/mesh/raced"));
    renameSync(at("var/lib/mesh/raced.moved"), at("var/lib/mesh/raced"));
    expect((await run([], { owns_nothing: true })).code).toBe(0);
    expect(existsSync(at("var/lib/mesh/raced"))).toBe(false);
  });
});
