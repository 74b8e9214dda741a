// `mesh upgrade TARGETS --to V` (issue 31) through the built executable against a real mesh (`mesh init`,
// `mesh up`), six nodes installed from a throwaway root, each under the real launcher: refused in one line
// before anything is sent (no declaration yet, V not stored); a good release goes out in waves of 1, 50 % and
// 100 %, each node pushed its own declaration naming V, the gate passing a node only once the release it
// restarted onto heartbeats confirmed; a release that cannot start halts at the canary (its launcher rolls it
// back, and says so), exit 4, and the other five never fetch it; with --on-halt revert, the canary is pushed its
// previous declaration again. A node offline during an upgrade gets the release when it comes back only if the
// rollout completed: a halted one (stop or revert) withdraws what it pushed the node.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, cpSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { State } from "../../src/store/index.ts";
import { confirmedOf, type LaunchedNode, TestMesh } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, waitFor } from "../mesh/index.ts";
import { mesh } from "../mesh/operator.ts";
import { nodeRecord } from "../mesh/state.ts";
import { RestartLoop } from "../support/restart-loop.ts";
import { ensureSea } from "../support/sea.ts";

const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");
const LOOP_ARGS = ["--heartbeat-s", "1", "--redial-spread-s", "1", "--drift-s", "600"];
const NAMES = ["u-1", "u-2", "u-3", "u-4", "u-5", "u-6"];
const SECRET = "hunter2-Up31";
const REPO = fileURLToPath(new URL("../..", import.meta.url));
/** Not the built executable's version: what the nodes heartbeat once they run the release. */
const VERSION = "0.2.0";

/**
 * The executable built again from these sources as version `version` (a copy of what the build reads, its
 * package.json saying that version): a release whose heartbeats say its version, as a real one's do. A test
 * variant (seaVariant) would not: it runs exactly as the executable it was copied from.
 */
function builtAs(version: string): string {
  const tree = join(base, `build-${version}`);
  mkdirSync(tree);
  for (const f of ["build", "src", "pkgbuild", "tsconfig.json"])
    cpSync(join(REPO, f), join(tree, f), { recursive: true });
  symlinkSync(join(REPO, "node_modules"), join(tree, "node_modules"));
  const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8"));
  writeFileSync(join(tree, "package.json"), JSON.stringify({ ...pkg, version }));
  const built = spawnSync(process.execPath, ["build/build.mjs"], { cwd: tree, encoding: "utf8" });
  expect(built.status, built.stderr).toBe(0);
  const bin = join(base, `mesh-host-${version}-linux-x64`);
  copyFileSync(join(tree, "dist", `mesh-host-${version}-linux-x64`), bin);
  rmSync(tree, { recursive: true, force: true });
  return bin;
}

let m: TestMesh;
let base: string;
let dir: string;

type Node = LaunchedNode;
let nodes: Node[];

const confirmed = confirmedOf;
/** The serial of the declaration the node keeps (what it last took from the mesh), or null. */
const keptSerial = (state: string): number | null => {
  const kept = new State(state).readDeclared();
  return kept ? (JSON.parse((kept.envelope as { body: string }).body) as { serial: number }).serial : null;
};

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("mesh-upgrade-");
  ({ base, dir } = m);
  nodes = [];
  for (const n of NAMES) nodes.push(await m.launched(n, LOOP_ARGS));
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

/** Waves of 1, 50 % and 100 %; a later `--waves` or `--gate-s` in `extra` is the one taken. */
const upgrade = (to: string, extra: string[] = [], targets = NAMES) =>
  mesh(dir, ["upgrade", ...targets, "--to", to, "--waves", "1,50%,100%", "--gate-s", "300", ...extra]);

describe("mesh upgrade", () => {
  it("refuses in one line, exit 2, sending nothing: a node with no declaration yet, a release not stored", async () => {
    const good = builtAs(VERSION);
    expect((await mesh(dir, ["release", "add", good])).code).toBe(0);
    const none = await upgrade(VERSION);
    expect(none.code, none.stderr).toBe(2);
    expect(none.stderr.trim().split("\n")).toHaveLength(1);
    expect(none.stderr).toMatch(/node u-1 has had no declaration from this mesh/);
    const file = join(base, "app.json");
    const app = { id: "conf", type: "file", path: "/etc/app.conf", content: "app\n" };
    const pw = { id: "pw", type: "file", path: "/etc/app.pw", secret: "pw", mode: "0600" };
    writeFileSync(file, JSON.stringify({ v: 1, mode: "converged", resources: [app, pw] }));
    writeFileSync(join(base, "pw"), `${SECRET}\n`);
    const pushed = await mesh(dir, [
      "push",
      ...NAMES,
      file,
      "--secret",
      `pw=${join(base, "pw")}`,
      "--wait-s",
      "300",
    ]);
    expect(pushed.code, pushed.stdout + pushed.stderr).toBe(0);
    const absent = await upgrade("9.9.9");
    expect(absent.code, absent.stderr).toBe(2);
    expect(absent.stderr.trim().split("\n")).toHaveLength(1);
    expect(absent.stderr).toMatch(/release 9\.9\.9 is not stored for node u-1 \(linux\/x64\)/);
    const jobs = JSON.parse((await mesh(dir, ["jobs", "--json"])).stdout);
    expect(JSON.stringify(jobs)).not.toMatch(/"rollout"/);
  });

  it("a good release in waves of 1, 50 % and 100 %: all six on it and confirmed, each its own declaration kept; exit 0", async () => {
    const good = join(base, `mesh-host-${VERSION}-linux-x64`);
    const r = await upgrade(VERSION, ["--json"]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /wave 1 of 3: u-1\n[\s\S]*wave 2 of 3: u-2, u-3\n[\s\S]*wave 3 of 3: u-4, u-5, u-6/,
    );
    const job = JSON.parse(r.stdout);
    // each node was pushed its own declaration again, its secret sealed to it as before: never shown, sealed or not
    const sealed = JSON.stringify((await nodeRecord(dir, "u-1")).last_body).match(/"pw":"(v1:[^"]+)"/)![1]!;
    expect(r.stdout + r.stderr).not.toContain(sealed);
    expect(r.stdout + r.stderr).not.toContain(SECRET);
    expect(job.rollout.previous["u-1"].secrets).toEqual({ pw: "(sealed)" });
    expect(job.rollout).toMatchObject({
      state: "done",
      release: VERSION,
      waves: [["u-1"], ["u-2", "u-3"], ["u-4", "u-5", "u-6"]],
    });
    for (const n of nodes) {
      expect(job.nodes[n.name].outcome).toBe("applied");
      // it swapped the release in and exited cleanly, for the launcher to start it
      expect(n.loop.exits[0]).toBe(0);
      // the gate passed it on a heartbeat of the release itself
      expect(sha(n.bin)).toBe(sha(good));
      await waitFor(
        () => confirmed(n.state) === sha(good),
        EVENT_WAIT_MS,
        `${n.name} confirmed on ${VERSION}`,
      );
      expect(readFileSync(join(n.root, "etc/app.conf"), "utf8")).toBe("app\n");
      expect(readFileSync(join(n.root, "etc/app.pw"), "utf8")).toBe(SECRET);
    }
    const status = await mesh(dir, ["rollout", "status", job.id]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/rollout done/);
  });

  it("a release that cannot start halts at the canary, rolled back by its launcher; the others never fetch it; exit 4", async () => {
    expect((await mesh(dir, ["release", "add", "/bin/false", "--version", "0.3.0"])).code).toBe(0);
    const before = nodes.map((n) => sha(n.bin));
    const starts = nodes.map((n) => n.loop.starts);
    const r = await upgrade("0.3.0", ["--on-halt", "stop", "--json"]);
    expect(r.code, r.stdout + r.stderr).toBe(4);
    const job = JSON.parse(r.stdout);
    expect(job.rollout.state).toBe("halted");
    expect(job.nodes["u-1"]).toMatchObject({ outcome: "failed" });
    expect(job.nodes["u-1"].detail).toMatch(/its launcher rolled back from release 0\.3\.0/);
    expect(nodes[0]!.loop.log).toMatch(/rolled back from [0-9a-f]{64} to [0-9a-f]{64} after 3 failed starts/);
    for (const [i, n] of nodes.entries()) {
      if (i === 0) continue;
      expect(sha(n.bin), n.name).toBe(before[i]);
      expect(job.nodes[n.name].outcome).toBe("untouched");
      expect(n.loop.starts, `${n.name} never restarted`).toBe(starts[i]);
      expect(n.loop.log).not.toMatch(/0\.3\.0/);
    }
  });
});

describe("mesh upgrade --on-halt revert", () => {
  it("puts the canary's previous declaration back (the release it named before), touching no other node", async () => {
    // another release that cannot start, of its own digest: not the one the canary was rolled back from
    const bad = join(base, "false-0.4.0");
    copyFileSync("/bin/false", bad);
    writeFileSync(bad, "\nanother\n", { flag: "a" });
    expect((await mesh(dir, ["release", "add", bad, "--version", "0.4.0"])).code).toBe(0);
    const starts = nodes.map((n) => n.loop.starts);
    const r = await upgrade("0.4.0", ["--json"]);
    expect(r.code, r.stdout + r.stderr).toBe(4);
    const job = JSON.parse(r.stdout);
    expect(job.nodes["u-1"].outcome).toBe("reverted");
    expect(job.nodes["u-1"].detail).toMatch(
      /^failed, then its previous declaration put back as serial \d+: applied$/,
    );
    // what the mesh last pushed it: the halted upgrade before (--on-halt stop) left it naming 0.3.0, the release
    // its launcher rolled back from, which it does not fetch again
    expect(job.rollout.previous["u-1"].host).toEqual({ release: "0.3.0" });
    expect(job.rollout.previous["u-2"].host).toEqual({ release: VERSION });
    for (const [i, n] of nodes.entries()) {
      if (i === 0) continue;
      expect(job.nodes[n.name].outcome).toBe("untouched");
      expect(n.loop.starts, `${n.name} never restarted`).toBe(starts[i]);
    }
  });
});

describe("a node offline during an upgrade", () => {
  const LATER = "0.5.0";
  /** u-6 away: its launcher stopped, as a machine switched off. */
  const away = async () => {
    await nodes[5]!.loop.stop();
    return nodes[5]!;
  };
  /** u-6 back: started again under its launcher. */
  const back = (n: Node) => {
    n.loop = new RestartLoop(n.bin, n.state, n.root, LOOP_ARGS);
    m.loops.push(n.loop);
  };

  /** A halted upgrade of u-6 alone while it is away, with `onHalt`; it comes back to what it had, never to LATER. */
  async function haltedWhileAway(onHalt: "stop" | "revert"): Promise<void> {
    const n = await away();
    const was = sha(n.bin);
    const r = await upgrade(
      LATER,
      ["--waves", "100%", "--gate-s", "20", "--on-halt", onHalt, "--json"],
      ["u-6"],
    );
    expect(r.code, r.stdout + r.stderr).toBe(4);
    const job = JSON.parse(r.stdout);
    expect(job.rollout.state).toBe("halted");
    expect(job.nodes["u-6"].outcome).toBe("silent");
    const withdrawn = Number(
      /the push withdrawn: its previous declaration sent again as serial (\d+), for when it comes back/.exec(
        job.nodes["u-6"].detail,
      )?.[1],
    );
    expect(withdrawn, job.nodes["u-6"].detail).toBeGreaterThan(job.nodes["u-6"].serial);
    back(n);
    // it takes what waits for it, the withdrawn push's replacement, and runs on confirmed: the upgrade never reached it
    await waitFor(() => keptSerial(n.state) === withdrawn, EVENT_WAIT_MS, `u-6 keeps serial ${withdrawn}`);
    await waitFor(() => confirmed(n.state) === was, EVENT_WAIT_MS, "u-6 confirmed on what it ran");
    expect(sha(n.bin)).toBe(was);
    expect(n.loop.exits).toEqual([]);
    expect(n.loop.log).not.toContain(LATER);
  }

  it("a halted upgrade (--on-halt stop) withdraws its push: the node back never fetches the release", async () => {
    expect((await mesh(dir, ["release", "add", builtAs(LATER)])).code).toBe(0);
    await haltedWhileAway("stop");
  });

  it("a halted upgrade (--on-halt revert) withdraws it too, waiting for no report from a node away", async () => {
    await haltedWhileAway("revert");
  });

  it("a completed upgrade: the node back gets the release, and confirms it", async () => {
    const n = await away();
    const later = join(base, `mesh-host-${LATER}-linux-x64`);
    const r = await upgrade(
      LATER,
      ["--waves", "100%", "--gate-s", "150", "--max-failed", "1", "--json"],
      ["u-5", "u-6"],
    );
    // done, with one node that did not come through within --max-failed
    expect(r.code, r.stdout + r.stderr).toBe(1);
    const job = JSON.parse(r.stdout);
    expect(job.rollout.state).toBe("done");
    expect(job.nodes["u-5"].outcome).toBe("applied");
    expect(job.nodes["u-6"]).toMatchObject({ outcome: "silent" });
    expect(job.nodes["u-6"].detail).not.toMatch(/withdrawn/);
    back(n);
    await waitFor(() => sha(n.bin) === sha(later), EVENT_WAIT_MS, `u-6 swapped onto ${LATER}`);
    await waitFor(() => confirmed(n.state) === sha(later), EVENT_WAIT_MS, `u-6 confirmed on ${LATER}`);
    expect(n.loop.exits[0]).toBe(0);
  });
});
