// Issue 29's "no password anywhere", searched for: a real mesh made by `mesh init`, run by `mesh up`, a node added,
// enrolled through the built executable and linked; then every file of the mesh directory and of the node's state,
// and every process of it (the servers, `mesh up`, the node's `run`: argv and environ), is read for a password
// (there is none to find) and for each private key and seed, which may stand only in its own 0600 file.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestMesh } from "../mesh/fleet.ts";
import { ensureSea } from "../support/sea.ts";
import { searchSecrets } from "../support/secret-search.ts";

let m: TestMesh;
let dir: string;
let state: string;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("mesh-search-");
  dir = m.dir;
  state = (await m.node("web-1")).state;
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

const inProcess = (problem: string) => / pid \d+$/.test(problem);

describe("no password anywhere, and every key only in its own 0600 file", () => {
  it("no file of the mesh or the node holds a password, and each secret stands only in its home, 0600", () => {
    const searched = searchSecrets([dir], [state]);
    expect(searched.secrets).toBeGreaterThanOrEqual(8);
    expect(searched.problems.filter((p) => !inProcess(p))).toEqual([]);
  });

  it("no process of the mesh or the node carries a password or a secret in its argv or environment", () => {
    const searched = searchSecrets([dir], [state]);
    expect(searched.processes).toBeGreaterThanOrEqual(3);
    expect(searched.problems.filter(inProcess)).toEqual([]);
  });
});
