// Issue 27, the host's edges, through the built executable as a user meets them: what is refused on arrival
// (one line, exit 2, nothing changed), and what an apply under `--root` makes and touches.
import { existsSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { REPO, useBuiltExecutable } from "../support/sea.ts";
import { tempMachine } from "../support/tmp.ts";

useBuiltExecutable();

function declaration(base: string, resources: unknown[], name = "d.json"): string {
  const file = join(base, name);
  writeFileSync(file, JSON.stringify({ v: 1, node: "n1", mode: "converged", resources }));
  return file;
}

/** `plan` then `apply` of `resources`: both refused in the one line `line`, exit 2, the root left empty. */
async function refusedOnArrival(resources: unknown[], line: string) {
  const { base, root, state } = tempMachine();
  const file = declaration(base, resources);
  for (const command of ["plan", "apply"]) {
    const r = await runCli([command, file, "--root", root, "--state", state]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(`${line}\n`);
  }
  expect(readdirSync(root)).toEqual([]);
}

describe("refused on arrival", () => {
  it("a file /x and a directory /x/y: one line naming both", async () => {
    await refusedOnArrival(
      [
        { id: "x", type: "file", path: "/srv/x", content: "a\n" },
        { id: "y", type: "directory", path: "/srv/x/y" },
      ],
      'mesh-host: resource "y", field "path": is under /srv/x, which "x" declares a file',
    );
  });

  it("a file under a file, further down, in either order", async () => {
    await refusedOnArrival(
      [
        { id: "deep", type: "file", path: "/srv/x/a/b", content: "b\n" },
        { id: "x", type: "file", path: "/srv/x", content: "a\n" },
      ],
      'mesh-host: resource "deep", field "path": is under /srv/x, which "x" declares a file',
    );
  });

  it("an action with a relative program, as a process is refused", async () => {
    await refusedOnArrival(
      [{ id: "go", type: "action", run: ["bin/deploy", "--now"] }],
      'mesh-host: resource "go", field "run.0": "bin/deploy" is a relative path, which runs whatever the host\'s working directory holds: give an absolute path, or a bare name it finds on its search path',
    );
  });
});

describe("an action under --root", () => {
  it("runs in the root with MESH_ROOT set, and `creates` is the path it made there: it runs once", async () => {
    const { base, root, state } = tempMachine();
    const file = declaration(base, [
      // a path relative to where it starts, and one under $MESH_ROOT: both are the root's
      {
        id: "init",
        type: "action",
        run: ["sh", "-c", "mkdir -p var/lib/app && touch var/lib/app/ready"],
        creates: "/var/lib/app/ready",
      },
      {
        id: "where",
        type: "action",
        run: ["sh", "-c", 'printf "%s %s" "$(pwd -P)" "$MESH_ROOT" > "$MESH_ROOT/where"'],
        creates: "/where",
      },
    ]);
    const first = await runCli(["apply", file, "--root", root, "--state", state, "--json"]);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout).report.steps.map((s: { did: string }) => s.did)).toEqual(["ran", "ran"]);
    expect(existsSync(join(root, "var/lib/app/ready"))).toBe(true);
    expect(readFileSync(join(root, "where"), "utf8")).toBe(`${realpathSync(root)} ${root}`);
    // nothing landed where the command was typed
    expect(existsSync(join(REPO, "var"))).toBe(false);
    const again = await runCli(["apply", file, "--root", root, "--state", state, "--json"]);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).report.steps).toMatchObject([
      { id: "init", did: "skipped", detail: "/var/lib/app/ready exists" },
      { id: "where", did: "skipped", detail: "/where exists" },
    ]);
  });
});
