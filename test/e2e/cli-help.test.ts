// The command line a new operator meets, through the built executable: help for every command from the one
// table the parser reads, --version, and every mistake a person can make answered in one line of our words.

import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { COMMANDS, exitsOf, FLAGS, flagsOf, GLOBAL_FLAGS, MESH_COMMANDS } from "../../src/cli/table.ts";
import { runCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

/** Text no library wrote: none of parseArgs', zod's, pino's or errno's phrasings. */
function ourWords(stderr: string): void {
  expect(stderr.trim().split("\n")).toHaveLength(1);
  expect(stderr).toMatch(/^mesh-host: /);
  for (const raw of [
    /ERR_PARSE_ARGS/,
    /Unknown option/,
    /Invalid input/,
    /expected \w+, received/,
    /custom levels/,
    /^mesh-host: E[A-Z]+:/,
    /ENOENT|ENOTDIR|EACCES/,
    / {4}at /,
  ])
    expect(stderr).not.toMatch(raw);
}

describe("help from the one table", () => {
  it("`help CMD` and `CMD --help` list every flag of the command with its default, the same text", async () => {
    for (const spec of COMMANDS) {
      if (spec.name === "help") continue;
      const viaHelp = await runCli(["help", spec.name]);
      const viaFlag = await runCli([spec.name, "--help"]);
      expect(viaHelp.code, spec.name).toBe(0);
      expect(viaFlag.stdout).toBe(viaHelp.stdout);
      expect(viaHelp.stdout).toContain(`usage: mesh-host ${spec.name}`);
      for (const f of flagsOf(spec)) {
        const line = viaHelp.stdout.split("\n").find((l) => l.includes(`--${f.name}`));
        expect(line, `${spec.name} --${f.name}`).toBeDefined();
        expect(line).toContain(`(default: ${f.default})`);
      }
    }
  });

  it("`mesh CMD --help` is that command's own usage, flags, defaults and exit statuses, at every level", async () => {
    const group = (await runCli(["mesh", "--help"])).stdout;
    for (const spec of MESH_COMMANDS) {
      const words = spec.name.split(" ");
      const r = await runCli(["mesh", ...words, "--help"]);
      expect(r.code, spec.name).toBe(0);
      expect(r.stdout).not.toBe(group);
      expect(r.stdout).toContain(`usage: mesh-host mesh ${spec.name}`);
      expect((await runCli(["mesh", "help", ...words])).stdout).toBe(r.stdout);
      expect((await runCli(["help", "mesh", ...words])).stdout).toBe(r.stdout);
      for (const f of flagsOf(spec)) {
        const line = r.stdout.split("\n").find((l) => l.includes(`--${f.name}`));
        expect(line, `${spec.name} --${f.name}`).toContain(`(default: ${f.default})`);
      }
      for (const [code, meaning] of exitsOf(spec)) expect(r.stdout).toContain(`  ${code}  ${meaning}`);
    }
    const push = (await runCli(["mesh", "push", "--help"])).stdout;
    expect(push).toContain("--wait-s S         seconds to wait for the reports (default: 60)");
    expect(push).toContain("3  a node said nothing within --wait-s");
    const node = await runCli(["mesh", "node", "--help"]);
    expect(node.code).toBe(0);
    expect(node.stdout).toMatch(/^usage: mesh-host mesh node add\|rm\|reissue\|label NAME/);
    expect((await runCli(["help", "mesh"])).stdout).toBe(group);
    const none = await runCli(["mesh", "help", "frobnicate"]);
    expect(none.code).toBe(2);
    ourWords(none.stderr);
  });

  it("`help CMD` ends with the command's exit statuses", async () => {
    const status = (await runCli(["status", "--help"])).stdout;
    expect(status).toContain("exit status:\n  0  all is well\n  1  the last apply failed");
    const enrol = (await runCli(["enrol", "--help"])).stdout;
    expect(enrol).toMatch(/ 1 {2}the bus could not be reached or did not answer\n/);
    expect(enrol).toMatch(/ 2 {2}refused: .*a node already enrolled \(without --replace\)/);
  });

  it("`help` lists every command and the global flags; no command is the same as help", async () => {
    const r = await runCli(["help"]);
    expect(r.code).toBe(0);
    for (const c of COMMANDS) expect(r.stdout).toMatch(new RegExp(`^  ${c.name}\\b`, "m"));
    for (const n of GLOBAL_FLAGS) expect(r.stdout).toContain(`--${FLAGS[n].name}`);
    expect((await runCli([])).stdout).toBe(r.stdout);
    expect((await runCli(["-h"])).stdout).toBe(r.stdout);
  });

  it("every flag the help names is one the parser takes (run's, enrol's and reconcile's included)", async () => {
    const base = tempDir();
    for (const spec of COMMANDS) {
      for (const f of spec.flags.map((n) => FLAGS[n])) {
        const value = "value" in f && f.value ? [f.choices?.[0] ?? (f.value === "S" ? "5" : "x")] : [];
        const r = await runCli([spec.name, `--${f.name}`, ...value, "--help", "--state", join(base, "s")]);
        expect(r.stderr, `${spec.name} --${f.name}`).toBe("");
        expect(r.code).toBe(0);
      }
    }
  });

  it("--version and -V say the version, as `version` does", async () => {
    const v = await runCli(["version"]);
    expect(v.stdout).toMatch(/^mesh-host \d+\.\d+\.\d+ \(commit /);
    expect((await runCli(["--version"])).stdout).toBe(v.stdout);
    expect((await runCli(["-V"])).stdout).toBe(v.stdout);
    expect(JSON.parse((await runCli(["--version", "--json"])).stdout).version).toMatch(/^\d/);
  });
});

describe("a mistake is one line in our words, exit 2", () => {
  const cases: [string, string[], RegExp][] = [
    [
      "an unknown flag",
      ["apply", "x.json", "--colour"],
      /unknown flag --colour \(see `mesh-host help apply`\)/,
    ],
    ["-v", ["-v"], /unknown flag -v \(see `mesh-host help`\)/],
    [
      "another command's flag",
      ["status", "--dry-run"],
      /status takes no --dry-run \(it is a flag of apply, genesis, reconcile\) \(see `mesh-host help status`\)/,
    ],
    [
      "a missing value",
      ["run", "--heartbeat-s"],
      /--heartbeat-s needs a value \(S\) \(see `mesh-host help run`\)/,
    ],
    [
      "a value not among the choices",
      ["status", "--log-format", "xml"],
      /--log-format must be json or text, not "xml"/,
    ],
    ["a switch given a value", ["status", "--json=yes"], /--json takes no value/],
    [
      "an unknown command",
      ["frobnicate"],
      /unknown command "frobnicate" \(commands: apply, .*see `mesh-host help`\)/,
    ],
    ["help for no command", ["help", "frobnicate"], /no help for "frobnicate"/],
    [
      "enrol with nothing on standard input",
      ["enrol"],
      /enrol reads the enrolment code from standard input \(or --code-file F\), and it was empty/,
    ],
    ["enrol garbage", ["enrol", "garbage"], /^mesh-host: enrolment code prefix: must start with "mesh1\."/m],
    ["a flag of enrol missing", ["enrol", "--node", "web-1"], /enrol --server is missing/],
    ["seconds that are not", ["run", "--drift-s", "soon"], /--drift-s must be a number of seconds/],
  ];
  it.each(cases)("%s", async (_what, args, line) => {
    const r = await runCli([...args, "--state", join(tempDir(), "s")]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    ourWords(r.stderr);
    expect(r.stderr).toMatch(line);
  });

  it("MESH_LOG that is no level", async () => {
    const r = await runCli(["status", "--state", join(tempDir(), "s")], { env: { MESH_LOG: "bogus" } });
    expect(r.code).toBe(2);
    ourWords(r.stderr);
    expect(r.stderr).toMatch(
      /MESH_LOG must be one of trace, debug, info, warn, error, fatal, silent, not "bogus"/,
    );
  });

  it("--state naming a file, or a path under a file", async () => {
    const base = tempDir();
    const file = join(base, "file");
    writeFileSync(file, "x");
    const r = await runCli(["status", "--state", file]);
    expect(r.code).toBe(2);
    ourWords(r.stderr);
    expect(r.stderr).toBe(`mesh-host: --state ${file} is not a directory\n`);
    const under = await runCli(["status", "--state", join(file, "deeper")]);
    expect(under.code).toBe(2);
    ourWords(under.stderr);
  });

  it("a state this user may not read says: run as root or give --state", async () => {
    const base = tempDir();
    chmodSync(base, 0o755);
    const state = join(base, "state");
    mkdirSync(state, { mode: 0o700 });
    writeFileSync(join(state, "node.json"), JSON.stringify({ format: 1, node: "n1", mode: null }));
    const r = spawnSync(
      "setpriv",
      [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        process.env.MESH_HOST_BIN!,
        "status",
        "--state",
        state,
      ],
      { encoding: "utf8" },
    );
    expect(r.status).toBe(2);
    ourWords(r.stderr);
    expect(r.stderr).toMatch(/permission denied \(run as root or give --state DIR\)/);
  });

  it('a field of the wrong type ("mode": 420) names the field in our words', async () => {
    const base = tempDir();
    const file = join(base, "d.json");
    const body = {
      v: 1,
      node: "n1",
      mode: "converged",
      resources: [{ id: "web", type: "file", path: "/x", content: "x", mode: 420 }],
    };
    writeFileSync(file, JSON.stringify(body));
    const r = await runCli(["plan", file, "--root", base, "--state", join(base, "s"), "--host", "linux"]);
    expect(r.code).toBe(2);
    ourWords(r.stderr);
    expect(r.stderr).toContain('resource "web", field "mode": must be a string (in quotes), not a number');
  });

  it("a FILE that does not exist, and `-` with nothing on standard input", async () => {
    const base = tempDir();
    const missing = await runCli([
      "plan",
      join(base, "nope.json"),
      "--root",
      base,
      "--state",
      join(base, "s"),
    ]);
    expect(missing.code).toBe(2);
    ourWords(missing.stderr);
    expect(missing.stderr).toContain(`cannot read ${join(base, "nope.json")}: it does not exist`);
    const empty = await runCli(["plan", "-", "--root", base, "--state", join(base, "s")], { input: "" });
    expect(empty.code).toBe(2);
    ourWords(empty.stderr);
    expect(empty.stderr).toContain("standard input is empty");
  });
});
