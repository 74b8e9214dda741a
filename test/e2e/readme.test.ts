// The README says what the executable prints: its command table is `mesh-host help`'s, its `help run` sample is
// the executable's, and the quick start's output blocks are what its commands, as written, print from an empty
// root.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { ensureSea, REPO } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

const README = readFileSync(join(REPO, "README.md"), "utf8");

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

/** The section of the README under `heading`, to the next heading of its level. */
function section(heading: string): string {
  const start = README.indexOf(`\n${heading}\n`);
  expect(start, heading).toBeGreaterThan(0);
  const next = README.indexOf("\n## ", start + heading.length + 2);
  return README.slice(start, next < 0 ? undefined : next);
}

/** The fenced blocks of `text`, with their info string. */
function blocks(text: string): { info: string; body: string }[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ info: m[1]!, body: m[2]! }));
}

describe("README.md", () => {
  it("its command table is the one `mesh-host help` prints", async () => {
    const help = (await runCli(["help"])).stdout;
    const listed = help
      .split("commands:\n")[1]!
      .split("\n\n")[0]!
      .split("\n")
      .map((l) => /^ {2}(\S+(?: \S+)?) {2,}(.*)$/.exec(l)!)
      .map((m) => [`mesh-host ${m[1]}`, m[2]]);
    const rows = section("## Commands")
      .split("\n")
      .filter((l) => l.startsWith("| `mesh-host"))
      .map((l) => /^\| `(.*)` \| (.*) \|$/.exec(l)!)
      .map((m) => [m[1]!.replace(/\\\|/g, "|"), m[2]!.replace(/\\\|/g, "|")]);
    expect(rows).toEqual(listed);
  });

  it("its `mesh-host help run` is what the executable prints", async () => {
    const text = section("## Commands");
    const at = text.indexOf("`mesh-host help run` prints:");
    const sample = blocks(text.slice(at))[0]!.body;
    expect(sample).toBe((await runCli(["help", "run"])).stdout);
  });

  it("its quick start prints what it says, run as written from an empty root", () => {
    const text = section("## Try it without a mesh");
    const [script, ...samples] = blocks(text);
    expect(script!.info).toBe("sh");
    const base = tempDir();
    const place = (line: string) =>
      line
        .replace(/#.*$/, "")
        .replace(/\/tmp\/demo-root/g, join(base, "root"))
        .replace(/\/tmp\/demo-state/g, join(base, "state"))
        .replace("npm run --silent mesh-host --", process.env.MESH_HOST_BIN!)
        .trim();
    const printed: string[] = [];
    for (const line of script!.body.trim().split("\n").map(place)) {
      const r = spawnSync("sh", ["-c", line], { cwd: REPO, encoding: "utf8" });
      expect(r.status, line).toBe(0);
      if (line.startsWith(process.env.MESH_HOST_BIN!)) printed.push(r.stdout);
    }
    // the first run, the second (nothing to do), the plan after the edit
    expect(samples.map((b) => b.body)).toEqual([printed[0], printed[1], printed[2]]);
  });
});
