// The rollback launcher (pkgbuild/launch) as a script, under every shell it must run in, with stand-in binaries:
// small sh scripts that start and confirm, start and never confirm, or fail, on purpose. Each test is one
// machine's history: installs, starts (what systemd's Restart=always would do), and what ran each time.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
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
import { spawnGroup } from "./support/processes.ts";
import { tempDir } from "./support/tmp.ts";

/** Resolves once `ok()` holds, looking every 50 ms; the test's own timeout is the deadline. */
async function until(ok: () => boolean): Promise<void> {
  while (!ok()) await new Promise((r) => setTimeout(r, 50));
}

const LAUNCH = join(import.meta.dirname, "../pkgbuild/launch");
/** dash is /bin/sh on Debian, mksh is Android's sh, bash is Arch's. */
const SHELLS = ["dash", "mksh", "bash"].filter(
  (sh) => spawnSync("sh", ["-c", `command -v ${sh}`]).status === 0,
);
/** Each shell by its absolute path: one test runs the launcher with a PATH that lacks it. */
const SHELL_PATHS = new Map(
  SHELLS.map((sh) => [sh, spawnSync("sh", ["-c", `command -v ${sh}`], { encoding: "utf8" }).stdout.trim()]),
);
const shellPath = (sh: string) => SHELL_PATHS.get(sh)!;

type Behaviour = "confirm" | "unconfirmed" | "fail";

interface Start {
  code: number | null;
  /** The stand-in that ran, or null when none did. */
  ran: string | null;
  stderr: string;
  env: Record<string, string>;
  argv: string[];
}

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/** The two files `mesh-host enrol` writes, in its order; the launcher looks only at whether they are there. */
function enrol(state: string) {
  mkdirSync(state, { recursive: true });
  writeFileSync(join(state, "membership.json"), "{}\n");
  writeFileSync(join(state, "node.json"), "{}\n");
}

/** One machine: an installed binary, a state directory, and the stand-ins that can be installed. */
function machine(shell: string, opts: { stateArg?: "space" | "equals" | "env"; enrolled?: boolean } = {}) {
  const base = tempDir("mesh-launch-");
  const bin = join(base, "usr/bin/mesh-host");
  const state = join(base, "state");
  const log = join(base, "log");
  mkdirSync(join(base, "usr/bin"), { recursive: true });
  mkdirSync(join(base, "standins"));
  // what `mesh-host enrol` leaves: `launch run` waits for it (a test of its own leaves it out)
  if (opts.enrolled !== false) enrol(state);

  /** A stand-in: logs what it was started as, then behaves. Its name makes its digest its own. */
  function standIn(name: string, behaviour: Behaviour): string {
    const file = join(base, "standins", name);
    writeFileSync(
      file,
      [
        "#!/bin/sh",
        `# stand-in ${name}: ${behaviour}`,
        `{ printf 'ran=${name}\\n'; printf 'arg=%s\\n' "$@"; printf 'self=%s\\n' "$0"; printf 'umask=%s\\n' "$(umask)"`,
        `  env | grep '^MESH_HOST_'; printf 'end\\n'; } >> '${log}'`,
        behaviour === "confirm"
          ? // the host's part: once it "completed a reconcile", it writes its own binary's digest
            `d=$(sha256sum < "$0"); printf '%s\\n' "\${d%% *}" > '${state}/confirmed'; exit 0`
          : behaviour === "unconfirmed"
            ? "exit 0"
            : "exit 1",
        "",
      ].join("\n"),
    );
    chmodSync(file, 0o755);
    return file;
  }

  function install(file: string) {
    // a package upgrade replaces the file (a new inode), as pacman does
    rmSync(bin, { force: true });
    copyFileSync(file, bin);
    chmodSync(bin, 0o755);
  }

  function start(extraEnv: Record<string, string> = {}, args = ["run", "--flag", "a b"]): Start {
    const stateArgs =
      opts.stateArg === "equals" ? [`--state=${state}`] : opts.stateArg === "env" ? [] : ["--state", state];
    const before = existsSync(log) ? readFileSync(log, "utf8").length : 0;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      MESH_HOST_BIN: bin,
      ...extraEnv,
    };
    if (opts.stateArg === "env") env.MESH_HOST_STATE = state;
    const r = spawnSync(shellPath(shell), [LAUNCH, ...args, ...stateArgs], { env, encoding: "utf8" });
    const record = existsSync(log) ? readFileSync(log, "utf8").slice(before) : "";
    const lines = record.split("\n").filter(Boolean);
    const ranLine = lines.find((l) => l.startsWith("ran="));
    const envOf = Object.fromEntries(
      lines
        .filter((l) => l.startsWith("MESH_HOST_"))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    return {
      code: r.status,
      ran: ranLine ? ranLine.slice(4) : null,
      stderr: r.stderr,
      env: {
        ...envOf,
        self: lines.find((l) => l.startsWith("self="))?.slice(5) ?? "",
        umask: lines.find((l) => l.startsWith("umask="))?.slice(6) ?? "",
      },
      argv: lines.filter((l) => l.startsWith("arg=")).map((l) => l.slice(4)),
    };
  }

  /** `n` starts; the names of what ran, in order. */
  function starts(n: number, env: Record<string, string> = {}): (string | null)[] {
    return Array.from({ length: n }, () => start(env).ran);
  }

  const launcherState = (): Record<string, string> =>
    Object.fromEntries(
      readFileSync(join(state, "launcher/state"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
  const note = () => {
    const file = join(state, "rollback-note");
    return existsSync(file) ? readFileSync(file, "utf8") : null;
  };

  return { base, bin, state, standIn, install, start, starts, launcherState, note };
}

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

  it("waits quietly for enrolment before `run`, one line, then starts the host once enrol wrote its files", async () => {
    const m = machine(shell, { enrolled: false });
    m.install(m.standIn("v1", "unconfirmed"));
    const log = join(m.base, "log");
    // a `sleep` that counts itself: each poll is an event the test can wait for
    const tools = join(m.base, "tools");
    const polls = join(m.base, "polls");
    mkdirSync(tools);
    writeFileSync(join(tools, "sleep"), `#!/bin/sh\necho "$1" >> '${polls}'\nexec /bin/sleep "$@"\n`);
    chmodSync(join(tools, "sleep"), 0o755);
    const pollCount = () => (existsSync(polls) ? readFileSync(polls, "utf8").split("\n").length - 1 : 0);
    // a group the test process ends: a launcher left waiting for enrolment would poll for ever
    const child = spawnGroup(shellPath(shell), [LAUNCH, "run", "--state", m.state], {
      env: { PATH: `${tools}:${process.env.PATH}`, MESH_HOST_BIN: m.bin, MESH_HOST_ENROL_POLL_S: "1" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    // three polls go by: nothing is started and nothing more is said
    await until(() => pollCount() >= 3);
    expect(existsSync(log)).toBe(false);
    expect(stderr.trim().split("\n")).toEqual([
      `mesh-host-launch: this node is not enrolled yet (no membership in ${m.state}): waiting for \`mesh-host enrol CODE\``,
    ]);
    expect(readFileSync(polls, "utf8").split("\n")[0]).toBe("1");
    // enrol writes the membership first: with the node's name still missing it keeps waiting
    mkdirSync(m.state, { recursive: true });
    writeFileSync(join(m.state, "membership.json"), "{}\n");
    const seen = pollCount();
    await until(() => pollCount() >= seen + 2);
    expect(existsSync(log)).toBe(false);
    writeFileSync(join(m.state, "node.json"), "{}\n");
    expect(await exited).toBe(0);
    expect(readFileSync(log, "utf8")).toContain("ran=v1");
    expect(stderr).toContain("enrolled: starting the host");
    expect(m.launcherState()).toMatchObject({ starts: "1" });
  });

  it("holds only `run`: another command runs at once on a node not enrolled", () => {
    const m = machine(shell, { enrolled: false });
    m.install(m.standIn("v1", "unconfirmed"));
    const s = m.start({}, ["status"]);
    expect(s.ran).toBe("v1");
    expect(s.stderr).not.toContain("not enrolled");
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
