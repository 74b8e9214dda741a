// A node moved onto a three-server cluster one of whose servers is down: its link comes up there, and a push
// to it is delivered within the default wait (issue 27, item 9). The node dialled the other bus as soon as the
// move was applied, before the consumer made for it there had elected a leader: its first pull was lost, and
// the node noticed only by missed heartbeats, a minute and more later.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { addNode, appConf, enrolAt, keptRuns, runLinkUp as linkUp } from "../mesh/fleet.ts";
import { freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { tempDir } from "../support/tmp.ts";

const WAIT = ["--wait-s", "120"];
const kept = keptRuns();

function file(base: string, name: string, value: object): string {
  const path = join(base, name);
  writeFileSync(path, JSON.stringify(value));
  return path;
}

const runLinkUp = (state: string, root: string) => linkUp(kept, { state, root });

describe("a move onto a cluster with a server down", () => {
  it("delivers the next push there", async () => {
    const base = tempDir("mesh-move-cluster-");
    const a = join(base, "mesh-a");
    const b = join(base, "mesh-b");
    await initMesh(a, await freePortPairs(1));
    await initMesh(b, await freePortPairs(3));
    kept.keep(await meshUp(a));
    // the cluster in one `mesh up`; server 2 is killed, which stops it; brought back without server 2
    const whole = kept.keep(await meshUp(b));
    process.kill(Number(readFileSync(join(b, "servers/2/server.pid"), "utf8")), "SIGKILL");
    expect(await whole.exited).toBe(1);
    await Promise.all([1, 3].map(async (i) => kept.keep(await meshUp(b, ["--only", String(i)]))));
    const { state, root } = await enrolAt(await addNode(a, "web-1"), join(base, "web-1"));
    let run = await runLinkUp(state, root);
    const first = await mesh(a, ["push", "web-1", file(base, "a.json", appConf("on a\n")), ...WAIT]);
    expect(first.code, first.stderr).toBe(0);
    const moved = await mesh(a, ["move", "web-1", "--to", b, ...WAIT]);
    expect(moved.code, moved.stderr).toBe(0);
    expect(await run.exited).toBe(0);
    run = await runLinkUp(state, root);
    // the default wait (60 s): a pull lost to a consumer without a leader took longer than that to be noticed
    const there = await mesh(b, ["push", "web-1", file(base, "b.json", appConf("on b\n"))]);
    expect(there.code, `${there.stdout}${there.stderr}\n${run.output().stderr}`).toBe(0);
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("on b\n");
  });
});
