// The man page and the shell completions the build makes from the one command table: they name every command
// and flag the executable takes, with the defaults its help prints, and the completions complete them.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { bashCompletion, manPage, meshManPage, zshCompletion } from "../../src/cli/manual.ts";
import { COMMANDS, FLAGS, flagsOf, MESH_COMMANDS } from "../../src/cli/table.ts";
import { runCli } from "../support/cli.ts";
import { ensureSea, PACKAGE, REPO } from "../support/sea.ts";

const DIST = join(REPO, "dist");

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

/** A man page as man(1) shows it, one line per line, no hyphenation or adjustment to get in the way. */
function rendered(page = "mesh-host.1"): string {
  const r = spawnSync("groff", ["-man", "-Tutf8", "-ww", "-rLL=300n", "-dAD=l", "-rHY=0", join(DIST, page)], {
    encoding: "utf8",
  });
  expect(r.stderr).toBe("");
  return r.stdout.replace(/.\x08/g, "").replace(/[\u2010\u2212]/g, "-");
}

describe("mesh-host.1", () => {
  it("is what the table makes now, and groff reads it without a warning", () => {
    expect(readFileSync(join(DIST, "mesh-host.1"), "utf8")).toBe(manPage(PACKAGE.version));
    rendered();
  });

  it("lists the operator's commands as `mesh-host mesh --help` says them, and `help mesh` is that", async () => {
    const usage = (await runCli(["mesh", "--help"])).stdout.trim();
    expect((await runCli(["help", "mesh"])).stdout.trim()).toBe(usage);
    const man = rendered();
    for (const line of usage.split("\n")) expect(man, line).toContain(line.trim());
  });

  it("names every command and every flag with the default `help CMD` prints", async () => {
    const man = rendered();
    for (const spec of COMMANDS) {
      expect(man, spec.name).toMatch(new RegExp(`^ +${spec.name}\\b`, "m"));
      const help = (await runCli(["help", spec.name])).stdout;
      for (const f of flagsOf(spec)) {
        const said = help.split("\n").find((l) => l.includes(`--${f.name}`))!;
        const helpDefault = /\(default: (.*)\)$/.exec(said)![1]!;
        expect(man, `${spec.name} --${f.name}`).toContain(`--${f.name}`);
        expect(man.replace(/\s+/g, " ")).toContain(`(default: ${helpDefault})`);
      }
    }
  });
});

describe("mesh-host-mesh.1", () => {
  it("is what the table makes now, and groff reads it without a warning", () => {
    expect(readFileSync(join(DIST, "mesh-host-mesh.1"), "utf8")).toBe(meshManPage(PACKAGE.version));
    rendered("mesh-host-mesh.1");
  });

  it("names every operator's command, each flag with the default and each exit status its --help prints", async () => {
    const man = rendered("mesh-host-mesh.1").replace(/\s+/g, " ");
    for (const spec of MESH_COMMANDS) {
      expect(man, spec.name).toContain(`mesh ${spec.name}`);
      const help = (await runCli(["mesh", ...spec.name.split(" "), "--help"])).stdout;
      for (const line of help.split("\n")) {
        const flag = /^ {2}(--\S+|-h, --help)\b.*\(default: (.*)\)$/.exec(line);
        if (flag) expect(man, `${spec.name} ${flag[1]}`).toContain(`(default: ${flag[2]})`);
        const exit = /^ {2}(\d) {2}(.*)$/.exec(line);
        if (exit) expect(man, `${spec.name} exit ${exit[1]}`).toContain(`${exit[1]} ${exit[2]}`);
      }
    }
  });
});

describe("completions", () => {
  it("are what the table makes now", () => {
    expect(readFileSync(join(DIST, "completions/mesh-host.bash"), "utf8")).toBe(bashCompletion());
    expect(readFileSync(join(DIST, "completions/_mesh-host"), "utf8")).toBe(zshCompletion());
  });

  /** What bash completes for the words typed so far (the last is the one being completed). */
  function complete(...words: string[]): string[] {
    const script = [
      `source ${join(DIST, "completions/mesh-host.bash")}`,
      `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})`,
      `COMP_CWORD=${words.length - 1}`,
      "_mesh_host",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash array, expanded by bash
      'printf "%s\\n" "${COMPREPLY[@]}"',
    ].join("\n");
    const r = spawnSync("bash", ["-c", script], { encoding: "utf8", cwd: REPO });
    expect(r.stderr).toBe("");
    return r.stdout.split("\n").filter(Boolean);
  }

  it("bash completes commands, each command's own flags, and the values a flag takes", () => {
    expect(complete("mesh-host", "")).toEqual([...COMMANDS.map((c) => c.name), "mesh"]);
    expect(complete("mesh-host", "mesh", "no")).toEqual(["node", "nodes"]);
    expect(complete("mesh-host", "re")).toEqual(["reconcile"]);
    for (const spec of COMMANDS)
      expect(complete("mesh-host", spec.name, "--").sort(), spec.name).toEqual(
        flagsOf(spec)
          .map((f) => `--${f.name}`)
          .sort(),
      );
    expect(complete("mesh-host", "status", "--log-format", "")).toEqual(["json", "text"]);
    expect(complete("mesh-host", "--host", "")).toEqual(["arch", "android", "linux"]);
    expect(complete("mesh-host", "genesis", "x", "--mode", "")).toEqual(["adopted", "converged"]);
    expect(complete("mesh-host", "help", "ins")).toEqual(["install-service"]);
    expect(complete("mesh-host", "apply", "packag")).toContain("package.json");
  });

  it("bash completes each operator's command's own flags from the same table, and a mesh directory", () => {
    for (const spec of MESH_COMMANDS) {
      const typed = ["mesh-host", "mesh", ...spec.name.split(" "), "--"];
      const same = MESH_COMMANDS.filter((c) => c.name.split(" ")[0] === spec.name.split(" ")[0]);
      const want = [...new Set(same.flatMap((c) => flagsOf(c).map((f) => `--${f.name}`)))].sort();
      expect(complete(...typed).sort(), spec.name).toEqual(want);
    }
    expect(complete("mesh-host", "mesh", "push", "--wa")).toEqual(["--wait-s"]);
    expect(complete("mesh-host", "mesh", "init", "--ti")).toEqual([]);
    expect(complete("mesh-host", "mesh", "move", "x", "--to", "tes")).toEqual(["test"]);
  });

  it("zsh's names every command and every flag", () => {
    const zsh = readFileSync(join(DIST, "completions/_mesh-host"), "utf8");
    expect(zsh.split("\n")[0]).toBe("#compdef mesh-host");
    for (const spec of COMMANDS) expect(zsh).toContain(`    ${spec.name}) _arguments `);
    for (const f of Object.values(FLAGS)) expect(zsh).toContain(`--${f.name}[`);
  });
});
