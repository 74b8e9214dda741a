// A push another push replaced before the node took it (two consoles, or a push beside a rollout): DECLARE keeps
// one declaration a node, so the older one never reaches a node that was away. Its `mesh push` used to wait out
// the whole --wait-s and exit 3 ("no report"), though the node's report of the newer one had come long before;
// now it says which serial replaced it as soon as that report comes, and exits 1 (set aside, as superseded).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appConf, runLinkUp, TestMesh } from "../mesh/fleet.ts";
import { waitForAsync } from "../mesh/index.ts";
import { nodeRecord } from "../mesh/state.ts";
import { startCli } from "../support/cli.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { ensureSea } from "../support/sea.ts";

/** Far longer than the test can take: a push that waited it out would fail the test by its own deadline. */
const WAIT = ["--wait-s", "600"];

let m: TestMesh;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("push-replaced-");
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

/** Until the node's record holds a push of `serial` with its stream sequence (published). */
async function published(serial: number): Promise<void> {
  await waitForAsync(
    async () => (await nodeRecord(m.dir, "web")).pushes.some((p) => p.serial === serial && p.seq !== null),
    EVENT_WAIT_MS,
    `serial ${serial} published`,
  );
}

describe("a push replaced on the bus before the node took it", () => {
  it("says which serial replaced it once the node reports that one, and exits 1", async () => {
    const node = await m.node("web");
    await node.run.stop();
    const base = (await nodeRecord(m.dir, "web")).serial;

    const older = m.keep(
      startCli(["mesh", "--mesh", m.dir, "push", "web", m.file("a.json", appConf("a\n")), ...WAIT]),
    );
    await published(base + 1);
    const newer = m.keep(
      startCli(["mesh", "--mesh", m.dir, "push", "web", m.file("b.json", appConf("b\n")), ...WAIT, "--json"]),
    );
    await published(base + 2);
    await runLinkUp(m.kept, node);

    expect(await newer.exited, newer.output().stderr).toBe(0);
    expect(JSON.parse(newer.output().stdout).nodes[0]).toMatchObject({
      serial: base + 2,
      report: { outcome: "applied" },
    });
    expect(await older.exited, older.output().stderr).toBe(1);
    expect(older.output().stdout.split("\n")[0]).toBe(
      `web: serial ${base + 1}: replaced by serial ${base + 2} before the node took it`,
    );
  });
});
