// Issue 27, the host's edges, through the built executable as a user meets them: what is refused on arrival
// (one line, exit 2, nothing changed), and what an apply under `--root` makes and touches.
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { useBuiltExecutable } from "../support/sea.ts";
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
