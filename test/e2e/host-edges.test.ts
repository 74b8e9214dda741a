// Issue 27, the host's edges, through the built executable as a user meets them: what is refused on arrival
// (one line, exit 2, nothing changed), and what an apply under `--root` makes and touches.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cliCommand, runCli } from "../support/cli.ts";
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

describe("parents the host makes (item 2)", () => {
  /** `fn` with the host started under umask `mask`: what it makes must not depend on it. */
  async function underUmask<T>(mask: number, fn: () => Promise<T>): Promise<T> {
    const before = process.umask(mask);
    try {
      return await fn();
    } finally {
      process.umask(before);
    }
  }
  const modeOf = (p: string) => (statSync(p).mode & 0o7777).toString(8);

  it("are 0755 root:root or as a directory declares them, shown in the plan, and go with the last resource under them", async () => {
    const { base, root, state } = tempMachine("etc");
    const file = declaration(base, [
      { id: "conf", type: "file", path: "/opt/app/conf", content: "a\n", mode: "0640" },
      { id: "two", type: "file", path: "/opt/app/two", content: "b\n", mode: "0640" },
      { id: "deep", type: "directory", path: "/srv/a/b", mode: "0700" },
      { id: "z", type: "file", path: "/var/x/y/z", content: "z\n" },
      { id: "x", type: "directory", path: "/var/x", mode: "0710" },
      // /etc was there: it is found, never recorded, never removed
      { id: "found", type: "file", path: "/etc/app.conf", content: "c\n" },
    ]);
    const args = ["--root", root, "--state", state];
    const plan = await underUmask(0o077, () => runCli(["plan", file, ...args]));
    expect(plan.code, plan.stderr).toBe(0);
    const lines = plan.stdout.split("\n");
    const line = (id: string) => lines.find((l) => l.includes(` ${id} `)) ?? "";
    expect(line("conf")).toMatch(/\/opt\/app\/conf created, making \/opt, \/opt\/app 0755 root:root$/);
    // the first declared under a new parent says it; the plan never says one twice
    expect(line("two")).toMatch(/\/opt\/app\/two created$/);
    expect(line("deep")).toMatch(/\/srv\/a\/b created, making \/srv, \/srv\/a 0755 root:root$/);
    expect(line("z")).toMatch(/\/var\/x\/y\/z created, making \/var, \/var\/x\/y 0755 root:root$/);
    expect(line("found")).toMatch(/\/etc\/app.conf created$/);
    expect(readdirSync(root)).toEqual(["etc"]);

    const applied = await underUmask(0o077, () => runCli(["apply", file, ...args]));
    expect(applied.code, applied.stderr).toBe(0);
    const dirs = ["opt", "opt/app", "srv", "srv/a", "var", "var/x/y"];
    for (const d of dirs) {
      expect(modeOf(join(root, d)), d).toBe("755");
      expect(statSync(join(root, d)).uid, d).toBe(0);
      expect(statSync(join(root, d)).gid, d).toBe(0);
    }
    expect(modeOf(join(root, "srv/a/b"))).toBe("700");
    expect(modeOf(join(root, "var/x"))).toBe("710");
    const records = JSON.parse(readFileSync(join(state, "records.json"), "utf8")).records;
    expect(records.conf.parents).toEqual(["/opt", "/opt/app"]);
    expect(records.two.parents).toEqual(["/opt", "/opt/app"]);
    expect(records.deep.parents).toEqual(["/srv", "/srv/a"]);
    // /var/x is the directory's own: the file records only what it made for itself
    expect(records.z.parents).toEqual(["/var", "/var/x/y"]);
    expect(records.found.parents).toBeUndefined();

    // one of two files in /opt/app undeclared: the directory holds the other, so it stays
    const keep = declaration(
      base,
      [{ id: "two", type: "file", path: "/opt/app/two", content: "b\n", mode: "0640" }],
      "keep.json",
    );
    const fewer = await runCli(["apply", keep, ...args, "--json"]);
    expect(fewer.code, fewer.stderr).toBe(0);
    const steps = JSON.parse(fewer.stdout).report.steps as { id: string; detail: string }[];
    expect(steps.find((s) => s.id === "conf")?.detail).toContain(
      "/opt/app left: it holds what was not made with it",
    );
    expect(steps.find((s) => s.id === "deep")?.detail).toContain("removed /srv/a, /srv (made for it)");
    expect(existsSync(join(root, "srv"))).toBe(false);
    expect(existsSync(join(root, "etc"))).toBe(true);
    expect(existsSync(join(root, "opt/app/two"))).toBe(true);

    // the last one under them goes: so do they
    const none = declaration(base, [], "none.json");
    writeFileSync(
      none,
      JSON.stringify({ v: 1, node: "n1", mode: "converged", owns_nothing: true, resources: [] }),
    );
    const emptied = await runCli(["apply", none, ...args]);
    expect(emptied.code, emptied.stderr).toBe(0);
    expect(emptied.stdout).toMatch(
      /\/opt\/app\/two removed \(the mesh created it\); removed \/opt\/app, \/opt \(made for it\)/,
    );
    // only what was found is left: the directory declared after the file in it went after it, and its parent
    expect(readdirSync(root)).toEqual(["etc"]);
    expect(readdirSync(join(root, "etc"))).toEqual([]);
  });
});

describe("misleading words (item 15)", () => {
  /** The one line `plan` refuses `resources` with, exit 2, nothing made. */
  async function planRefusal(resources: unknown[]): Promise<string> {
    const { base, root, state } = tempMachine();
    const r = await runCli(["plan", declaration(base, resources), "--root", root, "--state", state]);
    expect(r.code, r.stdout).toBe(2);
    return r.stderr;
  }

  it("an owner or group that does not resolve blames that field, never path", async () => {
    const { base, root, state } = tempMachine();
    const file = declaration(base, [
      { id: "a", type: "file", path: "/a", content: "x\n", owner: "nobody-here" },
      { id: "d", type: "directory", path: "/d", group: "no-group-here" },
    ]);
    const r = await runCli(["plan", file, "--root", root, "--state", state]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'resource "a", field "owner": user "nobody-here" does not exist on this machine',
    );
    expect(r.stderr).not.toContain('field "path"');
    const d = await planRefusal([{ id: "d", type: "directory", path: "/d", group: "no-group-here" }]);
    expect(d).toBe(
      'mesh-host: resource "d", field "group": group "no-group-here" does not exist on this machine\n',
    );
  });

  it("a typo'd field is named first, with the field it likely meant", async () => {
    expect(await planRefusal([{ id: "a", type: "file", path: "/a", contnt: "x\n" }])).toMatch(
      /^mesh-host: resource "a", field "contnt": unknown field; did you mean "content"\? \(and 1 more\)\n$/,
    );
    expect(await planRefusal([{ id: "a", type: "file", path: "/a", content: "x", mdoe: "0644" }])).toBe(
      'mesh-host: resource "a", field "mdoe": unknown field; did you mean "mode"?\n',
    );
  });

  it("an invalid id shows the value and the rule in words, never a regex", async () => {
    const line = await planRefusal([{ id: "Web Site", type: "file", path: "/a", content: "x" }]);
    expect(line).toBe(
      'mesh-host: resource "resources[0]", field "id": "Web Site" is not a name: a name starts with a lower-case letter or a digit and holds only those, ".", "_" and "-", at most 63 characters\n',
    );
  });

  it("the size limit is said in MiB", async () => {
    const { base, root, state } = tempMachine();
    const big = join(base, "big.json");
    writeFileSync(big, " ".repeat(20 * 1024 * 1024));
    const r = await runCli(["plan", big, "--root", root, "--state", state]);
    expect([r.code, r.stderr]).toEqual([2, `mesh-host: ${big} is 20 MiB, more than the 16 MiB allowed\n`]);
  });

  it("enrol garbage says 'enrolment code' once", async () => {
    const { root, state } = tempMachine();
    const r = await runCli(["enrol", "--state", state, "--root", root], { input: "garbage\n" });
    expect([r.code, r.stderr]).toEqual([2, 'mesh-host: enrolment code prefix: must start with "mesh1."\n']);
  });

  it("a --root this user may not reach says permission denied, not 'is not a directory'", async () => {
    const { base, state } = tempMachine();
    const shut = join(base, "shut");
    mkdirSync(join(shut, "root"), { recursive: true });
    chmodSync(shut, 0o700);
    chmodSync(base, 0o755);
    const file = declaration(base, [{ id: "a", type: "file", path: "/a", content: "x" }]);
    chmodSync(file, 0o644);
    const [cmd, ...pre] = cliCommand();
    const r = spawnSync(
      "setpriv",
      [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        cmd!,
        ...pre,
        "plan",
        file,
        "--root",
        join(shut, "root"),
        "--state",
        state,
      ],
      { encoding: "utf8" },
    );
    expect([r.status, r.stderr]).toEqual([
      2,
      `mesh-host: --root ${join(shut, "root")}: permission denied; run as root, or give a --root this user may read\n`,
    ]);
  });

  it("plan with purge names what it would purge", async () => {
    const { base, root, state } = tempMachine("srv/site/old", "srv/site/keep");
    writeFileSync(join(root, "srv/site/junk"), "j");
    const file = declaration(base, [
      { id: "site", type: "directory", path: "/srv/site", purge: true },
      { id: "keep", type: "directory", path: "/srv/site/keep" },
    ]);
    const r = await runCli(["plan", file, "--root", root, "--state", state]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("/srv/site: purge /srv/site/junk, /srv/site/old");
  });
});

describe("owns_nothing, both ways through an apply (item 17)", () => {
  it("an empty resources list without it is refused and changes nothing; with it, everything the mesh made goes", async () => {
    const { base, root, state } = tempMachine();
    const args = ["--root", root, "--state", state];
    const made = await runCli([
      "apply",
      declaration(base, [{ id: "a", type: "file", path: "/srv/a", content: "a\n" }]),
      ...args,
    ]);
    expect(made.code, made.stderr).toBe(0);
    const empty = join(base, "empty.json");
    writeFileSync(empty, JSON.stringify({ v: 1, node: "n1", mode: "converged", resources: [] }));
    const refused = await runCli(["apply", empty, ...args]);
    expect([refused.code, refused.stdout]).toEqual([2, ""]);
    expect(refused.stderr).toBe(
      'mesh-host: declaration field "resources": is empty; set owns_nothing: true if the node is meant to drop everything the mesh owned\n',
    );
    expect(readFileSync(join(root, "srv/a"), "utf8")).toBe("a\n");
    const nothing = join(base, "nothing.json");
    writeFileSync(
      nothing,
      JSON.stringify({ v: 1, node: "n1", mode: "converged", owns_nothing: true, resources: [] }),
    );
    const dropped = await runCli(["apply", nothing, ...args, "--json"]);
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(JSON.parse(dropped.stdout).report.steps.map((s: { did: string }) => s.did)).toEqual(["removed"]);
    expect(readdirSync(root)).toEqual([]);
    // and owns_nothing with resources is refused: it would say the node owns nothing while declaring something
    const both = join(base, "both.json");
    writeFileSync(
      both,
      JSON.stringify({
        v: 1,
        node: "n1",
        mode: "converged",
        owns_nothing: true,
        resources: [{ id: "b", type: "file", path: "/b", content: "b" }],
      }),
    );
    const contradictory = await runCli(["apply", both, ...args]);
    expect(contradictory.code).toBe(2);
    expect(readdirSync(root)).toEqual([]);
  });
});
