// What `mesh up` keeps of the buckets in memory (src/mesh/keeper.ts), against a real mesh brought up by `mesh up`:
// read whole once, then key by key as each change is heard. Reading the whole of both buckets again after every
// change made a 10,000-node mesh's controller spend a second of CPU a change through an enrolment.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addNode, MeshDir, openState, removeNode, type State } from "../../src/mesh/index.ts";
import { Keeper } from "../../src/mesh/keeper.ts";
import { changeNode } from "../../src/mesh/state.ts";
import { ensureSea } from "../support/sea.ts";
import { TestMesh } from "./fleet.ts";

const EVENT_MS = 60_000;

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + EVENT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${EVENT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

let m: TestMesh;
let state: State;
beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("keeper-");
  state = await openState(new MeshDir(m.dir));
}, 600_000);
afterAll(async () => {
  await state?.bus.close();
  await m?.stop();
});

describe("Keeper: the nodes and codes in a controller's memory", () => {
  it("follows adds, changes and removals key by key, never reading the buckets whole again", async () => {
    const dir = new MeshDir(m.dir);
    for (let i = 0; i < 20; i++) await addNode(dir, `k-${i}`);
    const told: string[] = [];
    const warned: string[] = [];
    const keeper = new Keeper(
      state,
      (l) => warned.push(l),
      (node, change) => told.push(`${change}:${node}`),
    );
    await keeper.start();
    try {
      expect(keeper.nodes.size).toBe(20);
      expect(keeper.codes.size).toBe(20);

      await addNode(dir, "k-new");
      await until(() => keeper.nodes.has("k-new") && keeper.codes.has("k-new"), "k-new in memory");
      expect(told).toEqual(["added:k-new"]);

      await changeNode(state, "k-3", (r) => ({ value: { ...r, labels: { role: "db" } }, result: undefined }));
      await until(() => keeper.nodes.get("k-3")?.labels.role === "db", "k-3's new label in memory");

      await removeNode(dir, "k-5");
      await until(() => !keeper.nodes.has("k-5") && !keeper.codes.has("k-5"), "k-5 gone from memory");
      expect(told).toEqual(["added:k-new", "removed:k-5"]);

      // the code's revision is the bucket's: what withdrawing a spent code compares and sets against
      const code = await state.codes.get("k-7");
      expect(keeper.codes.get("k-7")?.revision).toBe(code?.revision);
      expect(keeper.wholeReads).toBe(1);
      expect(warned).toEqual([]);
    } finally {
      keeper.stop();
    }
  }, 300_000);
});
