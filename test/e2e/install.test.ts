// Copy-and-run: the bare executable installs its own unit and launcher on a machine no package reached.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

const verify = (root: string) =>
  spawnSync(
    "systemd-analyze",
    ["verify", "--recursive-errors=no", "--man=no", `--root=${root}`, "mesh-host.service"],
    { encoding: "utf8" },
  );
const execStartOf = (root: string) =>
  readFileSync(join(root, "etc/systemd/system/mesh-host.service"), "utf8")
    .split("\n")
    .find((l) => l.startsWith("ExecStart="));

describe("mesh-host install-service", () => {
  it("writes the launcher, the unit and itself under --root, from an empty directory with no environment", () => {
    const sea = ensureSea();
    const box = tempDir();
    const root = join(box, "root");
    mkdirSync(root);
    copyFileSync(sea, join(box, "mesh-host"));
    const r = spawnSync(
      "/usr/bin/env",
      [
        "-i",
        join(box, "mesh-host"),
        "install-service",
        "--root",
        root,
        "--state",
        join(root, "var/lib/mesh-host"),
        "--json",
      ],
      {
        cwd: box,
        encoding: "utf8",
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).written).toEqual([
      "/usr/lib/mesh-host/launch",
      "/etc/systemd/system/mesh-host.service",
      "/usr/bin/mesh-host",
    ]);
    expect(statSync(join(root, "usr/lib/mesh-host/launch")).mode & 0o777).toBe(0o755);
    expect(readFileSync(join(root, "etc/systemd/system/mesh-host.service"), "utf8")).toContain(
      "ExecStart=/usr/lib/mesh-host/launch run",
    );
    expect(statSync(join(root, "var/lib/mesh-host")).mode & 0o777).toBe(0o700);
    const installed = spawnSync(join(root, "usr/bin/mesh-host"), ["version"], { encoding: "utf8", env: {} });
    expect(installed.stdout).toMatch(/^mesh-host \S+ \(commit \S+\) node v24\.22\.3 host \w+/);
    const verified = verify(root);
    expect(verified.status, verified.stderr).toBe(0);
    // the package's state directory needs no flag: the unit is the package's own
    expect(execStartOf(root)).toBe("ExecStart=/usr/lib/mesh-host/launch run");
  });

  it("carries every flag of `run` it is given into the unit's ExecStart, the state as the service sees it", async () => {
    const box = tempDir();
    const root = join(box, "root");
    mkdirSync(root);
    const r = await runCli([
      "install-service",
      "--root",
      root,
      "--state",
      join(root, "srv/mesh-state"),
      "--host",
      "arch",
      "--heartbeat-s",
      "10",
      "--drift-s",
      "120",
      "--move-grace-s",
      "900",
      "--log-format",
      "json",
      "--json",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const line =
      "/usr/lib/mesh-host/launch run --state /srv/mesh-state --host arch --log-format json --heartbeat-s 10 --drift-s 120 --move-grace-s 900";
    expect(JSON.parse(r.stdout).exec_start).toBe(line);
    expect(execStartOf(root)).toBe(`ExecStart=${line}`);
    expect(statSync(join(root, "srv/mesh-state")).mode & 0o777).toBe(0o700);
    // the launcher finds the same state directory in the same arguments
    expect(readFileSync(join(root, "usr/lib/mesh-host/launch"), "utf8")).toContain("--state) state=$arg");
    // from the sources no executable is copied; one put there makes the unit verifiable in the root
    copyFileSync(ensureSea(), join(root, "usr/bin/mesh-host"));
    const verified = verify(root);
    expect(verified.status, verified.stderr).toBe(0);
  });

  it("refuses, one line and exit 2 with nothing written, a flag it cannot carry or a state the service cannot see", async () => {
    const box = tempDir();
    const root = join(box, "root");
    mkdirSync(root);
    const state = join(root, "var/lib/mesh-host");
    const before = snapshot(root);
    const cases: [string[], RegExp][] = [
      [["--token", "tok-SECRET-1"], /install-service takes no --token/],
      [["--secret", "pw=/nowhere"], /install-service takes no --secret/],
      [["--server", "nats://a:1"], /install-service takes no --server/],
      [["--mode", "adopted"], /install-service takes no --mode/],
      [["--dry-run"], /install-service takes no --dry-run/],
      [["--state", join(box, "elsewhere")], /is not under --root/],
      [["--state", join(root, "with space")], /cannot go into the unit as it is/],
      [["--state", join(root, "100%")], /cannot go into the unit as it is/],
    ];
    for (const [flags, message] of cases) {
      const args = flags.includes("--state") ? flags : [...flags, "--state", state];
      const r = await runCli(["install-service", "--root", root, ...args]);
      expect(r.code, `${flags.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr.trim().split("\n"), flags.join(" ")).toHaveLength(1);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain("SECRET");
      expect(r.stdout).toBe("");
    }
    expect(snapshot(root)).toEqual(before);
    expect(existsSync(join(root, "etc"))).toBe(false);
  });
});
