// Copy-and-run says what it needs: the glibc and libstdc++ floor of the pinned runtime, measured from its ELF
// version needs (the same versions `objdump -T` prints), published in the README, and kept by `npm run build`,
// which fails when a runtime needs more. The README's one-line check is run where libstdc++ is missing.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  CXXABI_FLOOR,
  compareVersions,
  type Family,
  floorProblem,
  GLIBC_FLOOR,
  GLIBCXX_FLOOR,
  highestNeeds,
} from "../../build/floor.mjs";
import { ensureSea, PINNED_RUNTIME, REPO } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

const FLOORS: Record<Family, string> = { GLIBC: GLIBC_FLOOR, GLIBCXX: GLIBCXX_FLOOR, CXXABI: CXXABI_FLOOR };

/** The highest version of each family among the imported symbols, as objdump -T lists them. */
function objdumpHighest(file: string): Record<Family, string> {
  const r = spawnSync("objdump", ["-T", file], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  expect(r.status, r.stderr).toBe(0);
  const out = {} as Record<Family, string>;
  for (const m of r.stdout.matchAll(/\b(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)\b/g)) {
    const family = m[1] as Family;
    if (!out[family] || compareVersions(m[2]!, out[family]) > 0) out[family] = m[2]!;
  }
  return out;
}

describe("the glibc and libstdc++ floor", () => {
  it("is what objdump -T measures of the pinned runtime, and what the ELF reader of the build reads", () => {
    expect(highestNeeds(PINNED_RUNTIME)).toEqual(objdumpHighest(PINNED_RUNTIME));
    expect(highestNeeds(PINNED_RUNTIME)).toEqual(FLOORS);
    expect(floorProblem(PINNED_RUNTIME)).toBeNull();
  });

  it("is broken, naming the version, by a runtime that needs more than any one published floor", () => {
    expect(floorProblem(PINNED_RUNTIME, { ...FLOORS, GLIBC: "2.17" })).toMatch(
      /needs GLIBC_2\.28, newer than the published floor GLIBC_2\.17/,
    );
    expect(floorProblem(PINNED_RUNTIME, { ...FLOORS, GLIBCXX: "3.4.19" })).toMatch(/needs GLIBCXX_3\.4\.21/);
    expect(floorProblem(PINNED_RUNTIME, { ...FLOORS, CXXABI: "1.3.9" })).toMatch(/needs CXXABI_1\.3\.11/);
    expect(floorProblem(join(REPO, "package.json"))).toMatch(/not an ELF file/);
  });

  it("is kept by npm run build: a lower floor than the runtime needs fails the build before it builds", () => {
    const build = (floor: string) =>
      spawnSync(process.execPath, [join(REPO, "build/build.mjs")], {
        encoding: "utf8",
        env: { ...process.env, MESH_GLIBC_FLOOR: floor },
        timeout: 120_000,
      });
    const low = build("2.17");
    expect(low.status).toBe(1);
    expect(low.stderr.trim()).toBe(
      'build: the pinned runtime needs GLIBC_2.28, newer than the published floor GLIBC_2.17 (build/floor.mjs, README "Copy and run"): raise both, or pin an older runtime',
    );
    expect(low.stdout).not.toContain("bundle");
    // the variable may only make the check stricter
    const high = build("2.99");
    expect(high.status).toBe(1);
    expect(high.stderr).toContain("no newer than the published 2.28");
  });

  it("is what the README publishes", () => {
    const readme = readFileSync(join(REPO, "README.md"), "utf8");
    expect(readme).toContain(`glibc ${GLIBC_FLOOR}`);
    expect(readme).toContain(`GLIBCXX_${GLIBCXX_FLOOR}`);
    expect(readme).toContain(`CXXABI_${CXXABI_FLOOR}`);
    expect(readme).toContain("ldd ./mesh-host-0.1.0-linux-x64 | grep 'not found'");
  });

  it.skipIf(process.getuid?.() !== 0)(
    "the README's check names what is missing in a root holding only glibc, where the executable cannot say it",
    () => {
      const sea = ensureSea();
      const root = tempDir("mesh-glibc-only-");
      const put = (from: string, to = from) => {
        mkdirSync(join(root, dirname(to)), { recursive: true });
        copyFileSync(realpathSync(from), join(root, to));
      };
      // glibc, and bash and grep for the check (ldd is a bash script); no libstdc++, no libgcc_s
      const lib = "/lib/x86_64-linux-gnu";
      for (const so of [
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "libtinfo.so.6",
        "libpcre2-8.so.0",
      ])
        put(join(lib, so));
      put("/lib64/ld-linux-x86-64.so.2");
      put("/bin/bash");
      put("/bin/grep");
      put("/usr/bin/ldd");
      put(sea, "/mesh-host-0.1.0-linux-x64");
      const run = spawnSync("chroot", [root, "/mesh-host-0.1.0-linux-x64", "version"], { encoding: "utf8" });
      expect(run.status).not.toBe(0);
      expect(run.stderr).toContain("error while loading shared libraries: libstdc++.so.6");
      const check = "ldd ./mesh-host-0.1.0-linux-x64 | grep 'not found'";
      const there = spawnSync("chroot", [root, "/bin/bash", "-c", `cd / && ${check}`], { encoding: "utf8" });
      expect(there.stdout).toContain("libstdc++.so.6 => not found");
      expect(there.stdout).toContain("libgcc_s.so.1 => not found");
      // on this machine, which has both, it prints nothing
      const here = spawnSync("bash", ["-c", check], { encoding: "utf8", cwd: root });
      expect(here.stdout).toBe("");
    },
  );
});
