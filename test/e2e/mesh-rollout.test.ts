// `mesh rollout` through the built executable against a real nats-server and twelve real `mesh-host run` nodes:
// waves that stop themselves. In waves 1, 25 %, 100 %, one node of wave 2 has an action that fails: the rollout
// halts, puts back waves 1–2 (their files as before), never touches the rest, exits 4, and the job record says
// all of it. A canary that is gone halts it on silence. A rollout interrupted between waves resumes and finishes
// without pushing a node of a finished wave again.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LinkedNode, runLinkUp as linkUp, TestMesh } from "../mesh/fleet.ts";
import { awaitOutput, mesh, meshSetUp } from "../mesh/operator.ts";
import { nodeRecord } from "../mesh/state.ts";
import { startCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

const NODES = Array.from({ length: 12 }, (_, i) => `n-${String(i + 1).padStart(2, "0")}`);
// no drift check while the test looks
const RUN_FLAGS = ["--drift-s", "86400"];
let m: TestMesh;

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

type Node = LinkedNode;

const runLinkUp = (state: string, root: string) => linkUp(m.kept, { state, root }, RUN_FLAGS);

/** A declaration whose action (not in v1) fails only where the node's root holds etc/broken. */
function release(base: string, tag: string): string {
  const check = {
    id: "check",
    type: "action",
    run: ["sh", "-c", 'test ! -e "$MESH_ROOT/etc/broken"'],
    on: ["motd"],
  };
  const path = join(base, `${tag}.json`);
  writeFileSync(
    path,
    JSON.stringify({
      v: 1,
      mode: "converged",
      resources: [
        { id: "motd", type: "file", path: "/etc/motd", content: `${tag}\n` },
        ...(tag === "v1" ? [] : [check]),
      ],
    }),
  );
  return path;
}

const motd = (n: Node) => readFileSync(join(n.root, "etc/motd"), "utf8");
const serials = (dir: string) => Promise.all(NODES.map(async (n) => (await nodeRecord(dir, n)).serial));

describe("mesh rollout", () => {
  let base: string;
  let dir: string;
  const nodes: Node[] = [];
  beforeAll(async () => {
    m = await TestMesh.start("mesh-rollout-");
    ({ base, dir } = m);
    for (const name of NODES)
      nodes.push(await m.node(name, { setUp: true, rootDirs: ["etc"], flags: RUN_FLAGS }));
    const first = await meshSetUp(dir, ["push", "--all", release(base, "v1"), "--wait-s", "120"]);
    expect(first.code, first.stdout + first.stderr).toBe(0);
  }, 600_000);
  afterAll(async () => {
    await m?.stop();
  });

  it("halts at wave 2's failed action, puts waves 1-2 back, never touches the rest, exit 4", async () => {
    writeFileSync(join(nodes[2]!.root, "etc/broken"), "");
    const before = await serials(dir);
    const r = await mesh(dir, [
      "rollout",
      "--all",
      release(base, "v2"),
      "--waves",
      "1,25%,100%",
      "--gate-s",
      "120",
      "--json",
    ]);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stderr).toMatch(/wave 1 of 3: n-01\n/);
    expect(r.stderr).toMatch(/wave 2 of 3: n-02, n-03\n/);
    expect(r.stderr).toMatch(/halted: 1 node\(s\) did not come through \(n-03 failed\)/);
    const job = JSON.parse(r.stdout);
    expect(job.rollout).toMatchObject({ state: "halted", wave: 1 });
    expect(job.rollout.waves.map((w: string[]) => w.length)).toEqual([1, 2, 9]);
    for (const n of ["n-01", "n-02"]) {
      expect(job.nodes[n]).toMatchObject({ outcome: "reverted" });
      expect(job.nodes[n].detail).toMatch(
        /^applied, then its previous declaration put back as serial \d+: applied$/,
      );
    }
    expect(job.nodes["n-03"]).toMatchObject({ outcome: "reverted" });
    expect(job.nodes["n-03"].detail).toMatch(/^failed, then its previous declaration put back/);
    expect(job.nodes["n-03"].steps.find((s: { id: string }) => s.id === "check")).toMatchObject({
      did: "failed",
    });
    for (const n of NODES.slice(3))
      expect(job.nodes[n]).toMatchObject({ outcome: "untouched", serial: null });
    // waves 1-2 back as they were; the rest were never sent a thing
    for (const n of nodes) expect(motd(n), n.name).toBe("v1\n");
    const after = await serials(dir);
    expect(after.slice(0, 3)).toEqual(before.slice(0, 3).map((s) => s + 2));
    expect(after.slice(3)).toEqual(before.slice(3));
    const status = await mesh(dir, ["rollout", "status", job.id]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^n-03\s+reverted\s+\d+\s+failed, then its previous declaration put back/m);
    expect(status.stdout).toMatch(/^n-04\s+untouched\s+-/m);
    expect(status.stdout).toMatch(/rollout halted: 1 node\(s\) did not come through/);
    expect(status.stdout).toMatch(/^ {2}wave 3: n-04, n-05/m);
    rmSync(join(nodes[2]!.root, "etc/broken"));
  });

  it("a canary that is gone halts it on silence; --on-halt stop leaves the nodes", async () => {
    const canary = nodes[0]!;
    await canary.run.stop();
    const before = await serials(dir);
    const r = await mesh(dir, [
      "rollout",
      "--all",
      release(base, "v3"),
      "--canary",
      "1",
      "--waves",
      "100%",
      "--gate-s",
      "5",
      "--on-halt",
      "stop",
    ]);
    expect(r.code, r.stderr).toBe(4);
    expect(r.stdout).toMatch(/^n-01\s+silent\s+\d+\s+no report within the gate \(5 s\)/m);
    expect(r.stdout).toMatch(/^n-02\s+untouched/m);
    const after = await serials(dir);
    expect(after[0]).toBe(before[0]! + 1);
    expect(after.slice(1)).toEqual(before.slice(1));
    canary.run = await runLinkUp(canary.state, canary.root);
    // it takes the declaration waiting for it when it comes back: stop left it sent
    const deadline = Date.now() + 120_000;
    while (motd(canary) !== "v3\n" && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
    expect(motd(canary)).toBe("v3\n");
  });

  it("interrupted between waves, resumes where it stood and touches no node twice", async () => {
    const before = await serials(dir);
    const first = startCli([
      "mesh",
      "--mesh",
      dir,
      "rollout",
      "--all",
      release(base, "v4"),
      "--waves",
      "2,100%",
      "--gate-s",
      "90",
    ]);
    m.keep(first);
    await awaitOutput(first, (o) => o.stderr.includes("wave 2 of 2"), "the second wave begun", 300_000);
    await first.stop("SIGKILL");
    const id = /job (\d{8}-\d{6}-[0-9a-f]{4})/.exec(first.output().stderr)![1]!;
    const resumed = await mesh(dir, ["rollout", "resume", id, "--json"]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const job = JSON.parse(resumed.stdout);
    expect(job.rollout.state).toBe("done");
    for (const n of NODES) expect(job.nodes[n].outcome, n).toBe("applied");
    for (const n of nodes) expect(motd(n), n.name).toBe("v4\n");
    // wave 1 was not pushed again; a node of wave 2 was pushed once, or twice only when the stopped run had taken
    // its serial and not yet published (a serial spent, nothing sent to the node)
    const after = await serials(dir);
    expect(after.slice(0, 2)).toEqual(before.slice(0, 2).map((s) => s + 1));
    for (let i = 2; i < NODES.length; i++) expect(after[i]! - before[i]!).toBeGreaterThanOrEqual(1);
    for (let i = 2; i < NODES.length; i++) expect(after[i]! - before[i]!).toBeLessThanOrEqual(2);
    const again = await mesh(dir, ["rollout", "resume", id]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is done: there is nothing to resume/);
  });

  it("abort from another terminal stops it before its next wave: no halt, nothing put back, the rest untouched", async () => {
    const first = nodes[0]!;
    await first.run.stop();
    const before = await serials(dir);
    const rollout = startCli([
      "mesh",
      "--mesh",
      dir,
      "rollout",
      "--all",
      release(base, "v6"),
      "--waves",
      "1,100%",
      "--gate-s",
      "20",
    ]);
    m.keep(rollout);
    await awaitOutput(rollout, (o) => o.stderr.includes("wave 1 of 2"), "the first wave begun", 300_000);
    const id = /job (\d{8}-\d{6}-[0-9a-f]{4})/.exec(rollout.output().stderr)![1]!;
    const aborted = await mesh(dir, ["rollout", "abort", id]);
    expect(aborted.code, aborted.stderr).toBe(0);
    expect(aborted.stdout).toMatch(/aborted: it stops before its next wave/);
    expect(await rollout.exited).toBe(1);
    expect(rollout.output().stdout).toMatch(/^rollout aborted$/m);
    expect(rollout.output().stdout).toMatch(/^n-02\s+untouched/m);
    const after = await serials(dir);
    expect(after[0]).toBe(before[0]! + 1);
    expect(after.slice(1)).toEqual(before.slice(1));
    const again = await mesh(dir, ["rollout", "abort", id]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/is aborted already/);
    first.run = await runLinkUp(first.state, first.root);
  });

  it("refuses a bad rollout in one line, sending nothing", async () => {
    const before = await serials(dir);
    const cases: [string[], RegExp][] = [
      [["--all", release(base, "v5"), "--waves", "10%,50%"], /the last wave must reach every node/],
      [["--all", release(base, "v5"), "--waves", "abc"], /is neither a count nor a percentage/],
      [["--all", release(base, "v5"), "--canary", "13"], /--canary 13: there are only 12 target node/],
      [["--all", release(base, "v5"), "--on-halt", "explode"], /on-halt/],
    ];
    for (const [args, says] of cases) {
      const r = await mesh(dir, ["rollout", ...args]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(says);
    }
    expect(await serials(dir)).toEqual(before);
  });
});
