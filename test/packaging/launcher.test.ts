// The rollback launcher (pkgbuild/launch) as a script, under every shell it must run in, with stand-in binaries:
// small sh scripts that start and confirm, start and never confirm, or fail, on purpose. Each test is one
// machine's history: installs, starts (what systemd's Restart=always would do), and what ran each time.
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LAUNCH, machine, SHELLS, sha256 } from "../support/launcher.ts";

describe.each(SHELLS)("the rollback launcher under %s", (shell) => {
  it("runs the installed binary with the arguments it was given, counts the start, and keeps a candidate copy", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "unconfirmed");
    m.install(v1);
    const s = m.start();
    expect(s.code).toBe(0);
    expect(s.ran).toBe("v1");
    expect(s.argv).toEqual(["run", "--flag", "a b", "--state", m.state]);
    expect(s.env.self).toBe(m.bin);
    expect(s.env.MESH_HOST_BIN).toBe(m.bin);
    expect(s.env.MESH_HOST_SHA256).toBe(sha256(v1));
    expect(s.env.MESH_HOST_INSTALLED_SHA256).toBe(sha256(v1));
    expect(m.launcherState()).toEqual({
      format: "1",
      release: sha256(v1),
      starts: "1",
      rolledback: "",
      kept: "",
      candidate: sha256(v1),
    });
    expect(sha256(join(m.state, "launcher/candidate-bin"))).toBe(sha256(v1));
    expect(statSync(join(m.state, "launcher")).mode & 0o777).toBe(0o700);
    expect(statSync(join(m.state, "launcher/state")).mode & 0o777).toBe(0o600);
  });

  it("passes the binary's exit status through and leaves the umask it was given", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "fail"));
    const s = spawnSync(shell, ["-c", `umask 022; exec ${shell} ${LAUNCH} run --state ${m.state}`], {
      env: { PATH: process.env.PATH, MESH_HOST_BIN: m.bin },
      encoding: "utf8",
    });
    expect(s.status).toBe(1);
    expect(readFileSync(join(m.base, "log"), "utf8")).toMatch(/^umask=0?022$/m);
  });

  it("finds the state directory in --state=DIR, or in MESH_HOST_STATE", () => {
    for (const stateArg of ["equals", "env"] as const) {
      const m = machine(shell, { stateArg });
      m.install(m.standIn("v1", "confirm"));
      expect(m.start().ran).toBe("v1");
      expect(existsSync(join(m.state, "launcher/state"))).toBe(true);
      expect(existsSync(join(m.state, "confirmed"))).toBe(true);
    }
  });

  it("runs a confirmed binary as it is, keeps a copy of it, and forgets the count", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "confirm");
    m.install(v1);
    expect(m.starts(3)).toEqual(["v1", "v1", "v1"]);
    expect(m.launcherState()).toMatchObject({ release: "", starts: "0", kept: sha256(v1), candidate: "" });
    expect(sha256(join(m.state, "launcher/confirmed-bin"))).toBe(sha256(v1));
    expect(existsSync(join(m.state, "launcher/candidate-bin"))).toBe(false);
    expect(m.note()).toBeNull();
  });

  it("accepts the confirmation as JSON with a sha256 member", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "unconfirmed");
    m.install(v1);
    m.start();
    writeFileSync(
      join(m.state, "confirmed"),
      `{"format":1,"sha256": "${sha256(v1)}","at":"2026-01-01T00:00:00Z"}\n`,
    );
    m.start();
    expect(m.launcherState()).toMatchObject({ starts: "0", kept: sha256(v1) });
  });

  it("rolls a failing upgrade back to the confirmed binary once, after 3 starts, though the upgrade replaced it", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "confirm");
    const v2 = m.standIn("v2", "fail");
    m.install(v1);
    m.starts(2);
    m.install(v2);
    const fails = Array.from({ length: 3 }, () => m.start());
    expect(fails.map((s) => [s.ran, s.code])).toEqual([
      ["v2", 1],
      ["v2", 1],
      ["v2", 1],
    ]);
    const back = m.start();
    expect(back.ran).toBe("v1");
    expect(back.code).toBe(0);
    expect(back.env.self).toBe(join(m.state, "launcher/confirmed-bin"));
    expect(back.env.MESH_HOST_SHA256).toBe(sha256(v1));
    expect(back.env.MESH_HOST_INSTALLED_SHA256).toBe(sha256(v2));
    const said = `rolled back from ${sha256(v2)} to ${sha256(v1)} after 3 failed starts`;
    expect(back.stderr).toContain(said);
    expect(m.note()).toBe(`${said}\n`);
    expect(m.launcherState()).toMatchObject({ rolledback: sha256(v2), kept: sha256(v1) });
  });

  it("stays on the rolled-back binary while it confirms itself again, until another release arrives", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "confirm");
    m.install(v1);
    m.start();
    m.install(m.standIn("v2", "fail"));
    expect(m.starts(4)).toEqual(["v2", "v2", "v2", "v1"]);
    // the host reported the note and deleted it; v1 keeps running after every restart (a reboot, say)
    rmSync(join(m.state, "rollback-note"));
    expect(m.starts(4)).toEqual(["v1", "v1", "v1", "v1"]);
    expect(m.note()).toBeNull();
    // a new release is counted afresh and, confirmed, runs as it is
    const v3 = m.standIn("v3", "confirm");
    m.install(v3);
    expect(m.starts(3)).toEqual(["v3", "v3", "v3"]);
    expect(m.launcherState()).toMatchObject({ release: "", starts: "0", rolledback: "", kept: sha256(v3) });
  });

  it("a rollback the host has not reported yet is kept: a second one is a second line of the note", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "confirm");
    m.install(v1);
    m.start();
    const v2 = m.standIn("v2", "fail");
    m.install(v2);
    expect(m.starts(4)).toEqual(["v2", "v2", "v2", "v1"]);
    // v1 runs and confirms again, but no report carried the note yet; then v3 fails as well
    const v3 = m.standIn("v3", "fail");
    m.install(v3);
    expect(m.starts(4)).toEqual(["v3", "v3", "v3", "v1"]);
    expect(m.note()).toBe(
      `rolled back from ${sha256(v2)} to ${sha256(v1)} after 3 failed starts\n` +
        `rolled back from ${sha256(v3)} to ${sha256(v1)} after 3 failed starts\n`,
    );
  });

  it("never rolls back twice: when the confirmed binary fails too, it keeps trying the installed one", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "confirm");
    m.install(v1);
    m.start();
    // the machine breaks: the confirmed binary no longer starts either. Stand in for that by a kept copy that
    // fails, recorded as the confirmed one.
    const broken = m.standIn("v1-on-a-broken-machine", "fail");
    copyFileSync(broken, join(m.state, "launcher/confirmed-bin"));
    writeFileSync(join(m.state, "confirmed"), `${sha256(broken)}\n`);
    writeFileSync(
      join(m.state, "launcher/state"),
      `format=1\nrelease=\nstarts=0\nrolledback=\nkept=${sha256(broken)}\ncandidate=\n`,
    );
    const v2 = m.standIn("v2", "fail");
    m.install(v2);
    const history = Array.from({ length: 10 }, () => m.start());
    // 3 starts of v2, one of the (failing) confirmed copy, then v2 for ever: no back and forth
    expect(history.map((s) => s.ran)).toEqual([
      "v2",
      "v2",
      "v2",
      "v1-on-a-broken-machine",
      ...Array(6).fill("v2"),
    ]);
    expect(history[4]!.stderr).toContain("the machine is the problem");
    expect(m.launcherState()).toMatchObject({ rolledback: sha256(v2), starts: "9" });
    expect(m.note()).toBe(`rolled back from ${sha256(v2)} to ${sha256(broken)} after 3 failed starts\n`);
  });

  it("rolls back to the binary confirmed last even when it was replaced before the launcher ran again", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "confirm");
    const v2 = m.standIn("v2", "confirm");
    m.install(v1);
    m.start();
    // v1 restarts onto v2 (a clean exit); v2 starts once, confirms, and is replaced by v3 before any restart
    m.install(v2);
    expect(m.start().ran).toBe("v2");
    expect(m.launcherState()).toMatchObject({ kept: sha256(v1), candidate: sha256(v2) });
    m.install(m.standIn("v3", "fail"));
    expect(m.starts(4)).toEqual(["v3", "v3", "v3", "v2"]);
    expect(m.note()).toContain(` to ${sha256(v2)} after 3 failed starts`);
  });

  it("counts a release replaced before it was confirmed afresh", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "confirm"));
    m.start();
    m.install(m.standIn("v2", "unconfirmed"));
    expect(m.starts(2)).toEqual(["v2", "v2"]);
    const v3 = m.standIn("v3", "unconfirmed");
    m.install(v3);
    expect(m.starts(3)).toEqual(["v3", "v3", "v3"]);
    expect(m.launcherState()).toMatchObject({ release: sha256(v3), starts: "3", candidate: sha256(v3) });
    expect(m.start().ran).toBe("v1");
  });

  it("keeps running a binary that never confirmed when no confirmed binary is kept", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "fail"));
    const history = Array.from({ length: 5 }, () => m.start());
    expect(history.map((s) => s.ran)).toEqual(["v1", "v1", "v1", "v1", "v1"]);
    expect(history[3]!.stderr).toContain("no other confirmed binary is kept");
    expect(m.launcherState()).toMatchObject({ starts: "5", rolledback: "" });
    expect(m.note()).toBeNull();
  });

  it("takes the limit from MESH_HOST_LAUNCH_LIMIT", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "confirm"));
    m.start();
    m.install(m.standIn("v2", "fail"));
    expect(m.starts(2, { MESH_HOST_LAUNCH_LIMIT: "1" })).toEqual(["v2", "v1"]);
    expect(m.note()).toMatch(/ after 1 failed starts\n$/);
  });

  it("does not run a kept copy that is no longer the confirmed binary", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "confirm"));
    // the second start keeps the copy; then it is damaged
    expect(m.starts(2)).toEqual(["v1", "v1"]);
    writeFileSync(join(m.state, "launcher/confirmed-bin"), "#!/bin/sh\necho damaged\n");
    m.install(m.standIn("v2", "fail"));
    const history = Array.from({ length: 4 }, () => m.start());
    expect(history.map((s) => s.ran)).toEqual(["v2", "v2", "v2", "v2"]);
    expect(history[3]!.stderr).toContain("no other confirmed binary is kept");
    expect(m.note()).toBeNull();
  });

  it("starts over from a launcher state it cannot read, and still runs the host", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "unconfirmed"));
    mkdirSync(join(m.state, "launcher"), { recursive: true });
    writeFileSync(join(m.state, "launcher/state"), "format=9\nrelease=zzz\nstarts=7\n");
    const s = m.start();
    expect(s.ran).toBe("v1");
    expect(s.stderr).toContain('has format "9", not 1');
    expect(m.launcherState()).toMatchObject({ format: "1", starts: "1" });
    writeFileSync(join(m.state, "launcher/state"), "format=1\nrelease=not-a-digest\nstarts=x\n");
    expect(m.start().ran).toBe("v1");
    expect(m.launcherState()).toMatchObject({ starts: "1" });
  });

  it("runs the installed binary without bookkeeping when the state directory cannot be written", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "unconfirmed"));
    rmSync(m.state, { recursive: true });
    writeFileSync(m.state, "a file where the state directory should be");
    const s = m.start();
    expect(s.ran).toBe("v1");
    expect(s.stderr).toContain("without counting starts or rolling back");
    expect(s.stderr).not.toContain("not enrolled");
  });

  it("ignores a confirmation that holds no digest", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "unconfirmed"));
    mkdirSync(m.state, { recursive: true });
    writeFileSync(join(m.state, "confirmed"), "yes\n");
    const s = m.start();
    expect(s.ran).toBe("v1");
    expect(s.stderr).toContain("no SHA-256 in it");
    expect(m.launcherState()).toMatchObject({ starts: "1", kept: "" });
  });

  it("keeps a copy of a binary confirmed without it (run by hand), and says when it has none to keep", () => {
    const m = machine(shell);
    const v1 = m.standIn("v1", "unconfirmed");
    m.install(v1);
    mkdirSync(m.state, { recursive: true });
    writeFileSync(join(m.state, "confirmed"), `${sha256(v1)}\n`);
    expect(m.start().ran).toBe("v1");
    expect(m.launcherState()).toMatchObject({ kept: sha256(v1), starts: "0" });
    expect(sha256(join(m.state, "launcher/confirmed-bin"))).toBe(sha256(v1));
    writeFileSync(join(m.state, "confirmed"), `${"ab".repeat(32)}\n`);
    const s = m.start();
    expect(s.ran).toBe("v1");
    expect(s.stderr).toContain("no copy of the confirmed binary abababababab to keep");
    expect(m.launcherState()).toMatchObject({ kept: sha256(v1), starts: "1" });
  });

  it("runs the installed binary without counting where there is no sha256sum", () => {
    const m = machine(shell);
    m.install(m.standIn("v1", "unconfirmed"));
    const tools = join(m.base, "tools");
    mkdirSync(tools);
    for (const t of [
      "env",
      "grep",
      "cat",
      "printf",
      "sh",
      "mkdir",
      "cp",
      "mv",
      "rm",
      "chmod",
      "tr",
      "date",
    ]) {
      const found = ["/usr/bin", "/bin"].map((d) => join(d, t)).find((f) => existsSync(f));
      if (found) symlinkSync(found, join(tools, t));
    }
    const s = m.start({ PATH: tools });
    expect(s.ran).toBe("v1");
    expect(s.stderr).toContain("no sha256sum on this machine");
    expect(existsSync(join(m.state, "launcher"))).toBe(false);
  });

  it("exits 127 when the installed binary is missing", () => {
    const m = machine(shell);
    const s = m.start();
    expect(s.code).toBe(127);
    expect(s.ran).toBeNull();
    expect(s.stderr).toContain("does not exist");
  });
});

it("is POSIX sh: every shell that runs it parses it", () => {
  expect(SHELLS).toEqual(expect.arrayContaining(["dash", "mksh"]));
  for (const sh of SHELLS) expect(spawnSync(sh, ["-n", LAUNCH]).status).toBe(0);
});
