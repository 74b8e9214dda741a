// Copy-and-run: the bare executable installs its own unit and launcher on a machine no package reached.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureSea } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

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
    const verify = spawnSync(
      "systemd-analyze",
      ["verify", "--recursive-errors=no", "--man=no", `--root=${root}`, "mesh-host.service"],
      {
        encoding: "utf8",
      },
    );
    expect(verify.status, verify.stderr).toBe(0);
  });
});
