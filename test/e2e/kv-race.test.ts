// Compare-and-set on the mesh's buckets in a three-server cluster: of writers naming one revision at once,
// exactly one wins. nats-server before 2.9.21 checks a write's expected last sequence per subject only against
// what its store holds, not the writes still being agreed (nats-server#4320): two raced writes both landed, and two
// operators pushing at once to one node were both given serial 3 (seen once in mesh-machines on a busy machine).
// Without the bucket-wide check (a bucket made as the fleet view is) all twelve won here, every time tried.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as z from "zod";
import {
  addNode,
  Bucket,
  Conflict,
  knownNode,
  labelNode,
  MeshDir,
  openState,
  preparePush,
  publishAndWait,
  reissueNode,
  removeNode,
  type State,
  unrecordedLine,
} from "../../src/mesh/index.ts";
import { makeKeyPair, makeOverlayKey, publicKeys } from "../../src/store/index.ts";
import { appConf, TestMesh } from "../mesh/fleet.ts";
import { ensureSea } from "../support/sea.ts";

// the writers of one State start from its own last write (kv.ts lastWritten), the others ask the stream
const WRITERS = 12;
const ROUNDS = 5;
const Value = z.object({ n: z.number() });

let m: TestMesh;
const states: State[] = [];
beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("kv-race-", 3);
  for (let i = 0; i < 2; i++) states.push(await openState(new MeshDir(m.dir)));
}, 600_000);
afterAll(async () => {
  for (const s of states) await s.bus.close();
  await m?.stop();
});

/** Added, and their records given keys as an enrolment gives them (no node dials: a push needs only the keys). */
async function enrolled(names: string[]): Promise<string[]> {
  for (const n of names) {
    await addNode(new MeshDir(m.dir), n);
    const keys = publicKeys({
      identity: makeKeyPair("ed25519"),
      sealing: makeKeyPair("x25519"),
      overlay: makeOverlayKey(),
    });
    const { value, revision } = await knownNode(states[0]!, n);
    await states[0]!.nodes.update(n, { ...value, keys, enrolled_at: new Date().toISOString() }, revision);
  }
  return names;
}

describe("a compare-and-set raced in a cluster", () => {
  it(`lets one of ${WRITERS} writers naming one revision win, ${ROUNDS} times over`, async () => {
    const buckets = states.map((s) => new Bucket(s.bus, "mesh-test-race", Value, true));
    await buckets[0]!.ensure(3);
    await buckets[0]!.put("k", { n: 0 });
    for (let round = 1; round <= ROUNDS; round++) {
      const before = (await buckets[0]!.get("k"))!;
      const tries = await Promise.all(
        Array.from({ length: WRITERS }, (_, i) =>
          buckets[i % buckets.length]!.update("k", { n: round * 100 + i }, before.revision).then(
            () => "won",
            (e: unknown) => (e instanceof Conflict ? "lost" : `failed: ${String(e)}`),
          ),
        ),
      );
      expect(
        tries.filter((t) => t === "won"),
        `round ${round}: ${tries.join(", ")}`,
      ).toHaveLength(1);
    }
  }, 600_000);

  it("lets writers of different keys at once all win: a create, an update and a removal each of its own key", async () => {
    const buckets = states.map((s) => new Bucket(s.bus, "mesh-test-race", Value, true));
    const keys = Array.from({ length: WRITERS }, (_, i) => `own-${i}`);
    for (const k of keys) await buckets[0]!.put(k, { n: 0 });
    const revisions = await Promise.all(keys.map(async (k) => (await buckets[0]!.get(k))!.revision));
    const wrote = await Promise.all(
      keys.flatMap((k, i) => {
        const b = buckets[i % buckets.length]!;
        return [b.update(k, { n: 1 }, revisions[i]!), b.create(`new-${i}`, { n: 2 })];
      }),
    );
    expect(wrote.every((seq) => seq > 0)).toBe(true);
    const removed = await Promise.all(
      keys.map(async (k, i) => buckets[i % buckets.length]!.remove(k, (await buckets[0]!.get(k))!.revision)),
    );
    expect(removed.every((seq) => seq > 0)).toBe(true);
  }, 600_000);

  // Each of the others' writes can spoil one try of the reissue or the removal, and they are fewer than its tries
  // (KV_CAS_TRIES): it is done every time, never "changed while it was reissued: try again" (an enrolment's answer
  // written in that window sent the simulated fleet's bench back so, at 6,670 of 10,000).
  const others = (dir: MeshDir, name: string) =>
    Array.from({ length: WRITERS }, (_, i) => labelNode(dir, name, { set: { [`w${i}`]: "1" }, remove: [] }));

  it(`reissues a node while ${WRITERS} operators label it at once: done, and none of their labels lost`, async () => {
    const dir = new MeshDir(m.dir);
    await addNode(dir, "race-re");
    const [reissued] = await Promise.all([reissueNode(dir, "race-re"), ...others(dir, "race-re")]);
    expect(reissued.enrolled).toBe(false);
    const record = (await knownNode(states[0]!, "race-re")).value;
    expect(Object.keys(record.labels)).toHaveLength(WRITERS);
    // the record names the code written, the one the operator was given
    expect(record.enrol?.user).toBe((await states[1]!.codes.get("race-re"))?.value.user);
  }, 600_000);

  it(`removes a node while ${WRITERS} operators label it at once: done, and it is gone`, async () => {
    const dir = new MeshDir(m.dir);
    await addNode(dir, "race-rm");
    const [removed] = await Promise.allSettled([removeNode(dir, "race-rm"), ...others(dir, "race-rm")]);
    expect(removed.status, String((removed as PromiseRejectedResult).reason)).toBe("fulfilled");
    expect(await states[0]!.nodes.get("race-rm")).toBeNull();
  }, 600_000);

  // A push raises each target's serial and then records each declaration's stream sequence, record after record,
  // each write starting from what this operator last read or wrote (no read before it, and the bucket's state
  // asked only when another writer came between). Here two operators push to the same nodes while a third labels
  // them: every write that started from a record or a bucket state since changed must lose and be tried again.
  it("pushes to 16 nodes from two operators at once while a third labels them: two serials each, every label and sequence kept", async () => {
    const dir = new MeshDir(m.dir);
    const names = await enrolled(Array.from({ length: 16 }, (_, i) => `race-push-${i}`));
    const push = async (state: State, content: string) => {
      const composed = await preparePush(state, names, { file: appConf(content), secrets: new Map() });
      return await publishAndWait(dir, state, composed, 0);
    };
    const [a, b] = await Promise.all([
      push(states[0]!, "a\n"),
      push(states[1]!, "b\n"),
      ...names.map((n) => labelNode(dir, n, { set: { labelled: "yes" }, remove: [] })),
    ]);
    for (const n of names) {
      const record = (await knownNode(states[0]!, n)).value;
      const mine = [a.find((p) => p.node === n)!, b.find((p) => p.node === n)!];
      expect(mine.map((p) => p.serial).sort(), n).toEqual([1, 2]);
      expect(record.serial, n).toBe(2);
      expect(record.labels, n).toEqual({ labelled: "yes" });
      for (const p of mine)
        expect(
          record.pushes.find((x) => x.serial === p.serial),
          n,
        ).toMatchObject({ digest: p.digest, seq: p.seq });
    }
  }, 600_000);

  // Recording a push's sequences is its own bookkeeping, after every declaration is out: a bus that stops taking
  // those writes (here the connection the records are written on, closed between the serials and the publishes)
  // fails no push and holds none up; what was not recorded is said, and the records claim no sequence.
  it("keeps a push whose stream sequences the bus would not record: published, said so, the records claiming none", async () => {
    const dir = new MeshDir(m.dir);
    const names = await enrolled(["unrec-1", "unrec-2", "unrec-3"]);
    const other = await openState(dir);
    const split: State = { ...states[0]!, nodes: other.nodes };
    const composed = await preparePush(split, names, { file: appConf("u\n"), secrets: new Map() });
    await other.bus.close();
    const pushed = await publishAndWait(dir, split, composed, 0);
    expect(pushed.map((p) => p.seq > 0)).toEqual([true, true, true]);
    expect(unrecordedLine(pushed)).toMatch(
      /^the stream sequences of 3 pushes were not recorded \(.*closed.*\): they were published and their reports count; /,
    );
    for (const p of pushed) {
      const record = (await knownNode(states[0]!, p.node)).value;
      expect(record.serial).toBe(p.serial);
      expect(record.pushes.find((x) => x.serial === p.serial)).toMatchObject({ digest: p.digest, seq: null });
    }
  }, 600_000);
});
