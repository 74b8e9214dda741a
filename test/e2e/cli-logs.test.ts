// Logs a person and journald can read, through the built executable: JSON when stderr is no terminal, a short
// line when it is (a pty made by script(1)), journald's <N> priority under systemd, a failed step at warn
// naming the resource and why, MESH_LOG=debug saying what the apply does, and no apply logged by a dry run.
import { spawnSync } from "node:child_process";
import { closeSync, fstatSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { decl } from "../support/offline.ts";
import { ensureSea } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

let sea: string;
beforeAll(() => {
  sea = ensureSea();
  process.env.MESH_HOST_BIN ??= sea;
}, 600_000);

/** A declaration whose second step fails: a file written, then an action that exits 3. */
function failing(base: string): string {
  const file = join(base, "d.json");
  writeFileSync(
    file,
    JSON.stringify(
      decl([
        { id: "conf", type: "file", path: "/etc/app.conf", content: "a=1\n" },
        { id: "boom", type: "action", run: ["sh", "-c", "exit 3"] },
      ]),
    ),
  );
  return file;
}

const lines = (stderr: string) => stderr.trim().split("\n").filter(Boolean);

/** The command as a person at a terminal runs it: stdout and stderr a pty (script -q), what it printed back. */
function onTerminal(args: string[], env: Record<string, string> = {}): string {
  const quoted = [sea, ...args].map((a) => `'${a}'`).join(" ");
  const r = spawnSync("script", ["-q", "-e", "-c", quoted, "/dev/null"], {
    encoding: "utf8",
    env: { ...process.env, ...env, TERM: "dumb" },
    input: "",
    timeout: 60_000,
  });
  return r.stdout.replace(/\r/g, "");
}

describe("logs", () => {
  it("stderr no terminal: one pino JSON line each; a failed step at warn naming it and why, the end at error", async () => {
    const base = tempDir();
    const r = await runCli(["apply", failing(base), "--root", base, "--state", join(base, "s")]);
    expect(r.code).toBe(1);
    const docs = lines(r.stderr).map((l) => JSON.parse(l));
    const failed = docs.find((d) => d.msg === "step failed");
    expect(failed).toMatchObject({ level: 40, id: "boom", type: "action" });
    expect(failed.reason).toMatch(/exit(ed)? (status )?3/);
    expect(docs.find((d) => d.msg === "apply failed")).toMatchObject({ level: 50, outcome: "failed" });
  });

  it("a terminal gets a short human line, never the JSON; --log-format json asks for it there", () => {
    const base = tempDir();
    const out = onTerminal(["apply", failing(base), "--root", base, "--state", join(base, "s")]);
    expect(out).toMatch(/^\d\d:\d\d:\d\d WARN step failed id=boom type=action reason=.*3/m);
    expect(out).toMatch(/^\d\d:\d\d:\d\d ERROR apply failed outcome=failed/m);
    expect(out).not.toContain('{"level"');
    const json = onTerminal(["status", "--state", join(base, "s"), "--log-format", "json"], {
      MESH_LOG: "debug",
    });
    expect(json).not.toMatch(/^\d\d:\d\d:\d\d /m);
  });

  it("under systemd (JOURNAL_STREAM names stderr) each line carries journald's priority", () => {
    const base = tempDir();
    const logFile = join(base, "journal");
    const fd = openSync(logFile, "w");
    const { dev, ino } = fstatSync(fd);
    const r = spawnSync(sea, ["apply", failing(base), "--root", base, "--state", join(base, "s")], {
      stdio: ["ignore", "ignore", fd],
      env: { ...process.env, JOURNAL_STREAM: `${dev}:${ino}` },
      timeout: 60_000,
    });
    closeSync(fd);
    expect(r.status).toBe(1);
    const logged = lines(readFileSync(logFile, "utf8"));
    expect(logged.find((l) => l.includes('"step failed"'))).toMatch(/^<4>\{/);
    expect(logged.find((l) => l.includes('"apply failed"'))).toMatch(/^<3>\{/);
    for (const l of logged) expect(l).toMatch(/^<[2-7]>\{/);
    // a JOURNAL_STREAM that is not this stderr (inherited by a child of the service) adds nothing
    const other = spawnSync(sea, ["apply", failing(base), "--root", base, "--state", join(base, "t")], {
      encoding: "utf8",
      env: { ...process.env, JOURNAL_STREAM: "1:1" },
    });
    for (const l of lines(other.stderr)) expect(l).toMatch(/^\{/);
  });

  it("MESH_LOG=debug says what the apply does; a dry run never logs an apply", async () => {
    const base = tempDir();
    const d = failing(base);
    const plan = await runCli(["plan", d, "--root", base, "--state", join(base, "s")], {
      env: { MESH_LOG: "debug" },
    });
    expect(plan.code).toBe(0);
    const planned = lines(plan.stderr).map((l) => JSON.parse(l));
    expect(planned.map((p) => p.msg)).toContain("planned (a dry run: nothing will be changed)");
    expect(plan.stderr).not.toMatch(/apply (finished|failed)|"applied"|step done/);
    const quiet = await runCli(["plan", d, "--root", base, "--state", join(base, "s")]);
    expect(quiet.stderr).toBe("");
    const applied = await runCli(["apply", d, "--root", base, "--state", join(base, "s")], {
      env: { MESH_LOG: "debug" },
    });
    const docs = lines(applied.stderr).map((l) => JSON.parse(l));
    expect(docs.find((x) => x.msg === "planned")).toMatchObject({ level: 20, steps: 2 });
    expect(docs.find((x) => x.msg === "step done")).toMatchObject({ level: 20, id: "conf", did: "created" });
  });
});
