// `plan --diff` and `apply --diff` through the built executable: each file's content as `diff -u` prints it,
// its mode and owner change, capped per file, in --json as a field; never a secret-filled file's content.
import { spawnSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_DIFF_LINES } from "../../src/defaults.ts";
import { runCli } from "../support/cli.ts";
import { useBuiltExecutable } from "../support/sea.ts";
import { snapshot, tempMachine } from "../support/tmp.ts";

useBuiltExecutable();

function declare(base: string, resources: unknown[], extra: object = {}): string {
  const file = join(base, `d-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ v: 1, node: "n1", mode: "converged", resources, ...extra }));
  return file;
}

const lines = (n: number, f: (i: number) => string) =>
  Array.from({ length: n }, (_, i) => `${f(i)}\n`).join("");

describe("--diff", () => {
  it("shows what plan and apply will change in words, and changes nothing on a plan", async () => {
    const { base, root, state } = tempMachine("etc");
    writeFileSync(join(root, "etc/app.conf"), "a=1\nb=2\nc=3\n", { mode: 0o644 });
    chmodSync(join(root, "etc/app.conf"), 0o644);
    const d = declare(base, [
      { id: "conf", type: "file", path: "/etc/app.conf", content: "a=1\nb=20\nc=3\n", mode: "0600" },
      { id: "new", type: "file", path: "/etc/new.conf", content: "x\n" },
    ]);
    const before = snapshot(root);
    const plan = await runCli(["plan", d, "--diff", "--root", root, "--state", state]);
    expect(plan.code).toBe(0);
    expect(snapshot(root)).toEqual(before);
    expect(plan.stdout).toContain(
      [
        "diff conf:",
        "--- /etc/app.conf (now)",
        "+++ /etc/app.conf (declared)",
        "@@ -1,3 +1,3 @@",
        " a=1",
        "-b=2",
        "+b=20",
        " c=3",
        "mode 0644 -> 0600",
        "diff new:",
        "--- /dev/null",
        "+++ /etc/new.conf (declared)",
        "@@ -0,0 +1 @@",
        "+x",
      ].join("\n"),
    );
    const json = JSON.parse(
      (await runCli(["plan", d, "--diff", "--json", "--root", root, "--state", state])).stdout,
    );
    expect(json.plan[0].diff).toContain("-b=2");
    expect(json.plan[0].diff).toContain("mode 0644 -> 0600");
    // without --diff, no field and no diff
    const plain = await runCli(["plan", d, "--json", "--root", root, "--state", state]);
    expect(JSON.parse(plain.stdout).plan[0]).not.toHaveProperty("diff");
    const applied = await runCli(["apply", d, "--diff", "--root", root, "--state", state]);
    expect(applied.code).toBe(0);
    expect(applied.stdout).toMatch(/^plan:\n[\s\S]*diff conf:\n--- \/etc\/app\.conf \(now\)[\s\S]*report:\n/);
    // nothing left to change: no diff at all
    const again = await runCli(["plan", d, "--diff", "--root", root, "--state", state]);
    expect(again.stdout).not.toContain("diff ");
  });

  it("is what `diff -u` says, hunk for hunk", async () => {
    const { base, root, state } = tempMachine("etc");
    const pairs: [string, string][] = [
      [lines(40, (i) => `line ${i}`), lines(40, (i) => (i % 9 === 4 ? `changed ${i}` : `line ${i}`))],
      [lines(30, (i) => `k${i}`), lines(25, (i) => `k${i + 5}`) + "tail\n"],
      ["same\nno newline", "same\nnow with one\n"],
      ["", "only\nnew\n"],
      [lines(12, (i) => `x${i}`), ""],
    ];
    for (const [i, [was, wanted]] of pairs.entries()) {
      const path = `/etc/pair-${i}`;
      writeFileSync(join(root, path), was);
      const wantedFile = join(base, `wanted-${i}`);
      writeFileSync(wantedFile, wanted);
      const d = declare(base, [{ id: "f", type: "file", path, content: wanted }]);
      const r = await runCli(["plan", d, "--diff", "--json", "--root", root, "--state", state]);
      const ours: string[] = JSON.parse(r.stdout).plan[0].diff;
      const gnu = spawnSync("diff", ["-u", join(root, path), wantedFile], { encoding: "utf8" }).stdout;
      const body = (text: string[]) => text.filter((l) => !/^(---|\+\+\+) /.test(l));
      expect(body(ours), `pair ${i}`).toEqual(body(gnu.trimEnd().split("\n")));
    }
  });

  it("is capped per file, saying how many lines it did not show", async () => {
    const { base, root, state } = tempMachine("etc");
    writeFileSync(
      join(root, "etc/big"),
      lines(1000, (i) => `old ${i}`),
    );
    const d = declare(base, [
      { id: "big", type: "file", path: "/etc/big", content: lines(1000, (i) => `new ${i}`) },
    ]);
    const r = await runCli(["plan", d, "--diff", "--json", "--root", root, "--state", state]);
    const diff: string[] = JSON.parse(r.stdout).plan[0].diff;
    expect(diff).toHaveLength(MAX_DIFF_LINES + 3);
    expect(diff.at(-1)).toMatch(/^\(\d+ more lines not shown\)$/);
  });

  it("never shows a file filled from a secret: (secret: content not shown)", async () => {
    const { base, root, state } = tempMachine("etc");
    const VALUE = "pg-superuser-7f3a9c";
    const OLD = "the-old-password-1d2e";
    writeFileSync(join(root, "etc/superuser"), OLD, { mode: 0o644 });
    chmodSync(join(root, "etc/superuser"), 0o644);
    const secretFile = join(base, "given");
    writeFileSync(secretFile, VALUE, { mode: 0o600 });
    const d = declare(
      base,
      [{ id: "su", type: "file", path: "/etc/superuser", secret: "superuser", mode: "0600" }],
      { secrets: { superuser: "installer" } },
    );
    for (const json of [[], ["--json"]]) {
      const r = await runCli([
        "plan",
        d,
        "--diff",
        ...json,
        "--secret",
        `superuser=${secretFile}`,
        "--root",
        root,
        "--state",
        state,
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain("(secret: content not shown)");
      expect(r.stdout).toContain("mode 0644 -> 0600");
      expect(r.stdout + r.stderr).not.toContain(VALUE);
      expect(r.stdout + r.stderr).not.toContain(OLD);
    }
    expect(readFileSync(join(root, "etc/superuser"), "utf8")).toBe(OLD);
  });
});
