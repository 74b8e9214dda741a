import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { State } from "../../src/store/index.ts";
import { runCli } from "../support/cli.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

const EXAMPLE = join(import.meta.dirname, "../../examples/web.json");

function place() {
  const base = tempDir();
  const root = join(base, "root");
  mkdirSync(join(root, "etc"), { recursive: true });
  writeFileSync(join(root, "etc/motd"), "the machine's own motd\n");
  return { root, state: join(base, "state"), base };
}

describe("mesh-host apply FILE (the offline path)", () => {
  it("applies the example, prints the plan then the report, and a second run changes nothing", async () => {
    const { root, state } = place();
    const first = await runCli(["apply", EXAMPLE, "--root", root, "--state", state]);
    expect(first.stderr).not.toContain("Error");
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^plan:\n/);
    expect(first.stdout).toMatch(/report:\n[\s\S]*applied: /);
    expect(readFileSync(join(root, "srv/site/index.html"), "utf8")).toContain("hello from the mesh");
    const before = snapshot(root);
    const second = await runCli(["apply", EXAMPLE, "--root", root, "--state", state, "--json"]);
    expect(second.code).toBe(0);
    const doc = JSON.parse(second.stdout);
    expect(Object.keys(doc)).toEqual(["plan", "report"]);
    expect(doc.report.steps.map((s: { did: string }) => s.did)).toEqual([
      "unchanged",
      "unchanged",
      "unchanged",
      "skipped",
    ]);
    expect(snapshot(root)).toEqual(before);
    // logs are JSON lines on stderr, never stdout
    for (const line of second.stderr.trim().split("\n")) expect(() => JSON.parse(line)).not.toThrow();
  });

  it("says what changed and a summary; unchanged steps only with --verbose, and always in --json", async () => {
    const { root, state } = place();
    expect((await runCli(["apply", EXAMPLE, "--root", root, "--state", state])).code).toBe(0);
    const again = await runCli(["apply", EXAMPLE, "--root", root, "--state", state]);
    expect(again.code).toBe(0);
    expect(again.stdout).not.toMatch(/^\s+unchanged\s/m);
    expect(again.stdout).toContain("(3 unchanged; --verbose lists them)");
    expect(again.stdout).toMatch(/^\s+skipped\s+action\s/m);
    expect(again.stdout.trim().split("\n").at(-1)).toMatch(/^applied: 3 unchanged, 1 skipped/);
    const verbose = await runCli(["apply", EXAMPLE, "--verbose", "--root", root, "--state", state]);
    expect(verbose.stdout.match(/^\s+unchanged\s/gm)).toHaveLength(6);
    expect(verbose.stdout).not.toContain("--verbose lists them");
    const json = JSON.parse(
      (await runCli(["apply", EXAMPLE, "--json", "--root", root, "--state", state])).stdout,
    );
    expect(json.plan.filter((l: { did: string }) => l.did === "unchanged")).toHaveLength(3);
    // not a terminal: no progress line, however long it took
    expect(again.stderr).not.toContain("\r");
  });

  it("--dry-run and plan print the plan and change nothing; --json --dry-run is {plan}", async () => {
    const { root, state } = place();
    const before = snapshot(root);
    const dry = await runCli(["apply", EXAMPLE, "--dry-run", "--json", "--root", root, "--state", state]);
    expect(dry.code).toBe(0);
    expect(Object.keys(JSON.parse(dry.stdout))).toEqual(["plan"]);
    const plan = await runCli(["plan", EXAMPLE, "--root", root, "--state", state]);
    expect(plan.stdout).toContain("plan (dry run, nothing changed)");
    expect(snapshot(root)).toEqual(before);
  });

  const bad: [string, string, RegExp][] = [
    ["not JSON", "{ this is not json", /declaration: the body is not JSON/],
    [
      "a schema failure",
      JSON.stringify({
        v: 1,
        node: "n",
        mode: "converged",
        resources: [{ id: "web", type: "file", path: "/x", content: "x", mode: "rwx" }],
      }),
      /resource "web", field "mode": must be an octal string/,
    ],
    [
      "a path outside the rule",
      JSON.stringify({
        v: 1,
        node: "n",
        mode: "converged",
        resources: [{ id: "up", type: "file", path: "/etc/../../x", content: "x" }],
      }),
      /resource "up", field "path": must not contain a "\.\." segment/,
    ],
    [
      "a repeated id",
      JSON.stringify({
        v: 1,
        node: "n",
        mode: "converged",
        resources: [
          { id: "a", type: "file", path: "/x", content: "x" },
          { id: "a", type: "file", path: "/y", content: "y" },
        ],
      }),
      /resource "a", field "id": is declared more than once/,
    ],
    [
      "an unknown type",
      JSON.stringify({
        v: 1,
        node: "n",
        mode: "converged",
        resources: [{ id: "s", type: "service", unit: "x.service" }],
      }),
      /resource "s", field "type": type "service": no applier for this OS/,
    ],
  ];
  it.each(bad)("refuses %s: exit 2, one line naming it, nothing changed", async (_what, body, line) => {
    const { root, state, base } = place();
    const file = join(base, "bad.json");
    writeFileSync(file, body);
    const before = snapshot(root);
    const r = await runCli(["apply", file, "--root", root, "--state", state, "--host", "linux"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(line);
    expect(snapshot(root)).toEqual(before);
  });

  it("refuses bad flags and a missing file with exit 2 and one line", async () => {
    const { root, state } = place();
    for (const args of [
      ["apply"],
      ["apply", "/no/such/file", "--root", root],
      ["apply", EXAMPLE, "--colour"],
      ["frobnicate"],
      ["apply", EXAMPLE, "--host", "windows"],
      ["apply", EXAMPLE, "--root", "/no/such/root"],
    ]) {
      const r = await runCli([...args, "--state", state]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
    }
  });

  it("refuses apply FILE once the node holds a declaration from the mesh", async () => {
    const { root, state } = place();
    mkdirSync(state, { recursive: true });
    writeFileSync(
      join(state, "declared.json"),
      JSON.stringify({ format: 1, seq: 3, digest: "x", received_at: "2026-01-01T00:00:00Z", envelope: {} }),
    );
    const r = await runCli(["apply", EXAMPLE, "--root", root, "--state", state]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("holds a declaration from the mesh");
  });

  it("version and status answer, in words and in --json", async () => {
    const { root, state } = place();
    const v = await runCli(["version", "--json"]);
    expect(JSON.parse(v.stdout)).toMatchObject({
      version: expect.any(String),
      node: expect.stringMatching(/^v\d+/),
    });
    await runCli(["apply", EXAMPLE, "--root", root, "--state", state]);
    const s = await runCli(["status", "--json", "--root", root, "--state", state]);
    expect(JSON.parse(s.stdout)).toMatchObject({
      node: "demo",
      mode: "converged",
      holds: [expect.objectContaining({ path: "/etc/motd" })],
    });
  });

  it("status names what an adopted node holds until a declaration takes it", async () => {
    const { root, state } = place();
    new State(state).writeRecords(
      {
        web: { type: "service", unit: "nginx.service", held: true, found: { load: "loaded" } },
        mine: { type: "service", unit: "mesh-web.service", found: { load: "not-found" } },
        store: { type: "container", name: "store", runtime: "docker", created: false },
        made: { type: "container", name: "made", runtime: "docker", created: true },
        backup: { type: "process", name: "backup", scheduled: false, bundle: {}, declared: "d", held: true },
        pg: {
          type: "package",
          name: "postgresql",
          found: { installed: true, version: "15.4-1" },
          held: true,
        },
      },
      ["web", "mine", "store", "made", "backup", "pg"],
    );
    // what a record of each kind holds is its applier's to say: the Arch host's, where these records are made
    const json = await runCli(["status", "--json", "--root", root, "--state", state, "--host", "arch"]);
    expect(JSON.parse(json.stdout).held).toEqual([
      { id: "web", type: "service", name: "nginx.service" },
      { id: "store", type: "container", name: "store" },
      { id: "backup", type: "process", name: "backup" },
      { id: "pg", type: "package", name: "postgresql" },
    ]);
    const words = await runCli(["status", "--root", root, "--state", state, "--host", "arch"]);
    expect(words.stdout).toContain(
      "held:        nginx.service (service web), store (container store), backup (process backup), postgresql (package pg): as found, until taken",
    );
  });
});
