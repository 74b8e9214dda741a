// A fleet enrolling at once: every node gets its answer. Two faults made a burst lose some: `mesh up` revoked a
// burst's spent enrolling users ENROL_REVOKE_DELAY_MS after the burst's first answer, so a code spent late could be
// revoked before its own answer went out (seen by bench:fleet --simulated at 3,000 nodes); and an answer crossing
// from the mesh's account while the servers took the nodes' account's new claims (a revocation pushed for other
// codes) was lost, and the node, asking once, was cut off by its own revocation ("the bus withdrew …"): 2 runs of 6
// here on a busy machine. Now each code is revoked from its own answer and a node unanswered asks again.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addNode, MeshDir } from "../../src/mesh/index.ts";
import { askEnrol } from "../mesh/enrolling.ts";
import { TestMesh } from "../mesh/fleet.ts";
import { ensureSea } from "../support/sea.ts";

// eight at a time, each worker asking again as soon as it is answered: answers keep going out for longer than
// ENROL_REVOKE_DELAY_MS, so revocations fall due while other questions are in the controller's hands
const WORKERS = 8;
const EACH = 40;

let m: TestMesh;
beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("enrol-burst-");
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

/** One node's enrolment, asked as `enrol` asks, in this process: the answer's words, or "ok". */
const enrolled = askEnrol;

describe("a burst of enrolments", () => {
  it(`answers all ${WORKERS * EACH}, none cut off by the revocation of another's spent code`, async () => {
    const dir = new MeshDir(m.dir);
    const codes: string[][] = [];
    for (let w = 0; w < WORKERS; w++) {
      codes.push([]);
      for (let i = 0; i < EACH; i++) codes[w]!.push(await addNode(dir, `b-${w}-${i}`));
    }
    const answers = (
      await Promise.all(
        codes.map(async (mine) => {
          const said: string[] = [];
          for (const code of mine) said.push(await enrolled(code));
          return said;
        }),
      )
    ).flat();
    const up = m.up.output();
    expect(
      answers.filter((a) => a !== "ok"),
      up.stdout + up.stderr,
    ).toEqual([]);
  }, 900_000);
});
