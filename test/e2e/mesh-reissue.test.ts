// A node taken out of its mesh and brought back, through the built executable against a real nats-server (issue
// 27, item 11): refused, the node says once that it was removed and waits quietly; `mesh node reissue` gives a new
// code, `enrol --replace` enrols the machine again with new keys keeping its records, `run` starts again on the
// new membership by itself, and the serials go on; `mesh nodes` never mixes a removed node's past into a new row.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appConf, TestMesh } from "../mesh/fleet.ts";
import { awaitOutput, mesh, serverDir } from "../mesh/operator.ts";
import { codeRecord, nodeRecord } from "../mesh/state.ts";
import { type Running, runCli, startRun } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

const WAIT = ["--wait-s", "120"];
/** A bound on the node's redials while refused (they back off to a minute apart), never a pace. */
const REDIALS_MS = 300_000;
let m: TestMesh;
let base: string;

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

const file = (name: string, value: object) => m.file(name, value);

/** The server's own log lines refusing the node's user. */
function refusals(dir: string): number {
  const log = readFileSync(join(serverDir(dir, 1), "server.log"), "utf8");
  return log.split("\n").filter((l) => /authentication error|authorization violation/i.test(l)).length;
}

async function until(check: () => boolean | Promise<boolean>, what: string, ms = REDIALS_MS): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("a node removed, reissued and enrolled again", () => {
  let dir: string;
  let state: string;
  let root: string;
  let run: Running;

  beforeAll(async () => {
    m = await TestMesh.start("mesh-reissue-");
    base = m.base;
    dir = m.dir;
    ({ state, root, run } = await m.node("web-1"));
    const pushed = await mesh(dir, ["push", "web-1", file("one.json", appConf("one\n")), ...WAIT]);
    expect(pushed.code, pushed.stderr).toBe(0);
  }, 300_000);

  it("refused after a reissue, the node says once that it was removed and waits quietly", async () => {
    const codeFile = join(base, "web-1.code");
    const r = await mesh(dir, ["node", "reissue", "web-1", "--code-file", codeFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /reissued web-1: its new enrolment code is in .*; on its machine: mesh-host enrol --replace/,
    );
    const before = refusals(dir);
    // three refused dials at least, by the server's own count
    await until(() => refusals(dir) >= before + 3, "three refused redials");
    const said = run
      .output()
      .stderr.split("\n")
      .filter((l) => l.includes("removed from its mesh"));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/refused node\.web-1's credentials: this node was removed from its mesh/);
    expect(run.output().stderr).not.toMatch(/Authorization Violation/i);
    expect(run.child.exitCode).toBeNull();
  });

  it("enrol says --replace is the way forward; --replace enrols with new keys, keeps the records, and run starts again by itself", async () => {
    const codeFile = join(base, "web-1.code");
    const plain = await runCli(["enrol", "--state", state, "--root", root, "--code-file", codeFile]);
    expect(plain.code).toBe(2);
    expect(plain.stderr).toMatch(/already enrolled .*`mesh-host enrol --replace`/);
    const identity = readFileSync(join(state, "identity/identity.key"), "utf8");
    const records = readFileSync(join(state, "records.json"), "utf8");
    const replaced = await runCli([
      "enrol",
      "--state",
      state,
      "--root",
      root,
      "--code-file",
      codeFile,
      "--replace",
    ]);
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(readFileSync(join(state, "identity/identity.key"), "utf8")).not.toBe(identity);
    expect(readFileSync(join(state, "records.json"), "utf8")).toBe(records);
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("one\n");
    // the refused run notices the new membership at its next dial and exits 0 for its service manager
    expect(await run.exited).toBe(0);
    expect(run.output().stderr).toContain("enrolled again: exiting to be started on the new membership");
    run = m.keep(startRun(state, root));
    await awaitOutput(run, (o) => o.stderr.includes('"link up"'), "the node's link up again");
    const pushed = await mesh(dir, ["push", "web-1", file("two.json", appConf("two\n")), ...WAIT]);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stdout).toMatch(/^web-1: serial 2\n/);
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("two\n");
    // the code is spent once the node is heard as itself: then refused in our words, exit 2
    await until(async () => (await codeRecord(dir, "web-1")) === null, "the code withdrawn once spent");
    const again = await runCli([
      "enrol",
      "--state",
      state,
      "--root",
      root,
      "--code-file",
      codeFile,
      "--replace",
    ]);
    expect(again.code).toBe(2);
    // the bus refuses the spent code's user once it is revoked (ENROL_REVOKE_DELAY_MS after its answer); before
    // that, the controller refuses the question, the code's record gone: either way one line in our words
    expect(again.stderr).toMatch(
      /refused enrol\.web-1's credentials: the enrolment code is wrong, already used, expired or withdrawn|the mesh refused the enrolment: node web-1 has no enrolment code/,
    );
    expect(again.stderr).not.toMatch(/Authorization Violation/i);
  });

  it("node rm: the running node says it once; no row is left, and one added again by its name shows nothing of the old one", async () => {
    const removed = () =>
      run
        .output()
        .stderr.split("\n")
        .filter((l) => l.includes("removed from its mesh"));
    expect(removed()).toHaveLength(0);
    const before = refusals(dir);
    expect((await mesh(dir, ["node", "rm", "web-1"])).code).toBe(0);
    expect(JSON.parse((await mesh(dir, ["nodes", "--json"])).stdout).nodes).toEqual([]);
    // node rm of a running node: the same, said once over its redials
    await until(() => refusals(dir) >= before + 3, "three refused redials");
    expect(removed()).toHaveLength(1);
    expect((await mesh(dir, ["node", "add", "web-1"])).code).toBe(0);
    const rows = JSON.parse((await mesh(dir, ["nodes", "--json"])).stdout).nodes;
    expect(rows).toEqual([
      expect.objectContaining({
        node: "web-1",
        enrolled: false,
        heartbeat_age_s: null,
        report: null,
        confirmed: null,
      }),
    ]);
    expect((await mesh(dir, ["nodes"])).stdout).toMatch(
      /web-1\s+not enrolled\s+\S+\s+never\s+-\s+-(\s+\S+)?\n/,
    );
    expect((await nodeRecord(dir, "web-1")).serial).toBe(0);
  });
});
