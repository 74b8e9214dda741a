// Issue 29: `node rm` costs the same at 10 nodes and at 10,000. Enrolling users are users of their own account,
// ENROL, so NODES' claims (pushed again at every `node rm`) carry nodes' revocations alone; ENROL's stay bounded by
// one revocation of every user issued up to a second ("*"), below the oldest code still to be used. Against the
// mesh's own `mesh up` (the built executable) and a real nats-server: each spent code is cut at once and refused
// again, an unspent code issued before, after, and in the same second as spent ones still enrols, and ENROL's list
// is the "*" and the entries after it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CODE_EXPIRES_S, ENROL_PRUNE_AFTER_MS } from "../../src/defaults.ts";
import { accountId, MeshDir, shardOf, userOfIdentity, withState } from "../../src/mesh/index.ts";
import { codeOf, enrolOf, newCode, newRecord } from "../../src/mesh/nodes.ts";
import { askEnrol, codeUser, dialWithCode, heldClaims, heldRevocations } from "../mesh/enrolling.ts";
import { addNode, TestMesh } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, waitFor } from "../mesh/index.ts";
import { mesh, meshUp } from "../mesh/operator.ts";
import { nodeRecord } from "../mesh/state.ts";
import { ensureSea } from "../support/sea.ts";

let m: TestMesh;
beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("enrol-account-");
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

/**
 * `mesh node add` as its function does it, with the code minted at `at` (a code an operator issued a while ago):
 * its record and its code.
 */
async function issuedAt(name: string, at: Date): Promise<string> {
  const mesh = new MeshDir(m.dir);
  const code = newCode(mesh, name, CODE_EXPIRES_S, at);
  await withState(mesh, async (state) => {
    await state.nodes.create(name, newRecord(name, at, enrolOf(code.record)));
    await state.codes.put(name, code.record);
  });
  return codeOf(mesh, name, code.credential);
}

const enrol = askEnrol;
const dialAs = (code: string) => dialWithCode(m.dir, code);

/** ENROL holds the code's user as revoked (its own entry, or "*" at or after its second). */
function revoked(code: string): boolean {
  const { user, iat } = codeUser(code);
  const held = heldRevocations(m.dir, "ENROL");
  return Math.max(held[user] ?? 0, held["*"] ?? 0) >= iat;
}

describe("enrolling users are ENROL's, revoked there", () => {
  it('unspent codes issued before, after, and in the same second as spent ones enrol; ENROL keeps "*" and the entries after it', async () => {
    // first in this mesh (no "*" yet, or these would be cut already): whole seconds well behind now (beyond
    // ENROL_REVOKE_ALL_MARGIN_S), so the floor is the codes' to set
    const second = Math.floor(Date.now() / 1000) - 600;
    const t0 = new Date(second * 1000);
    const spent = [await issuedAt("same-1", t0), await issuedAt("same-2", t0), await issuedAt("same-3", t0)];
    // unspent, issued in the very second of the spent ones: the floor must stay below that second
    const sameSecond = await issuedAt("same-p", t0);
    const later = await issuedAt("later-b", new Date((second + 100) * 1000));
    for (const code of spent) expect(await enrol(code)).toBe("ok");
    await waitFor(() => spent.every(revoked), EVENT_WAIT_MS, "ENROL to revoke the three spent codes");
    const held = heldRevocations(m.dir, "ENROL");
    expect(held["*"]).toBeLessThan(second);
    for (const code of spent) expect(held[codeUser(code).user]).toBe(second);
    // the unspent code of the same second still signs in and enrols; so does the one issued after
    await (await dialAs(sameSecond)).close();
    expect(await enrol(sameSecond)).toBe("ok");
    await waitFor(() => revoked(sameSecond), EVENT_WAIT_MS, "ENROL to revoke the fourth spent code");
    // the oldest code still to be used is later-b: every user issued before it goes under one "*"
    await waitFor(
      () => heldRevocations(m.dir, "ENROL")["*"] === second + 99,
      EVENT_WAIT_MS,
      `ENROL's "*" to reach the second before later-b's`,
    );
    const bounded = heldRevocations(m.dir, "ENROL");
    for (const code of [...spent, sameSecond]) expect(bounded[codeUser(code).user]).toBeUndefined();
    expect(Object.keys(bounded).every((k) => k === "*" || bounded[k]! > second + 99)).toBe(true);
    // a code issued now, after the spent ones, and the older unspent one both enrol
    const now = await addNode(m.dir, "now-c");
    expect(await enrol(now)).toBe("ok");
    expect(await enrol(later)).toBe("ok");
    await waitFor(() => revoked(now) && revoked(later), EVENT_WAIT_MS, "ENROL to revoke the last two");
    // every spent credential is refused
    for (const code of [...spent, sameSecond, later, now])
      await expect(dialAs(code)).rejects.toThrow(/authentication|authorization/i);
    // what remains is "*" and the users issued after it: never one entry an enrolment
    const last = heldRevocations(m.dir, "ENROL");
    expect(Object.keys(last).length).toBeLessThanOrEqual(2);
    expect(Object.keys(heldRevocations(m.dir, "NODES"))).toEqual([]);
  }, 600_000);

  it("a code's user is ENROL's; spent, it is cut at once and refused again, and NODES never names it", async () => {
    const code = await addNode(m.dir, "cut-1");
    // signed by ENROL's key, not NODES'
    expect(codeUser(code).issuer).toBe(accountId(new MeshDir(m.dir).accountKeys(), "enrol"));
    // whoever holds the code keeps a connection open with its credential, and keeps it after the node enrols
    const held = await dialAs(code);
    const closed = held.closed();
    expect(await enrol(code)).toBe("ok");
    await waitFor(() => revoked(code), EVENT_WAIT_MS, "ENROL to hold the spent code's revocation");
    await closed;
    await expect(dialAs(code)).rejects.toThrow(/authentication|authorization/i);
    // asked again with the spent code: refused (by the bus, or by the controller), never answered
    expect(await enrol(code)).not.toBe("ok");
    expect(Object.keys(heldRevocations(m.dir, "NODES"))).not.toContain(codeUser(code).user);
  }, 300_000);
});

describe("node rm", () => {
  it("revokes a node's user in its shard and its pending code's in ENROL: no node account names an enrolling user", async () => {
    const enrolled = await addNode(m.dir, "gone-1");
    expect(await enrol(enrolled)).toBe("ok");
    await waitFor(() => revoked(enrolled), EVENT_WAIT_MS, "ENROL to revoke gone-1's spent code");
    const user = userOfIdentity((await nodeRecord(m.dir, "gone-1")).keys!.identity)!;
    const pending = await addNode(m.dir, "pending-1");
    const shard = shardOf("gone-1");
    const before = Object.keys(heldRevocations(m.dir, shard));
    for (const name of ["gone-1", "pending-1"]) {
      const r = await mesh(m.dir, ["node", "rm", name]);
      expect(r.code, r.stderr).toBe(0);
    }
    expect(Object.keys(heldRevocations(m.dir, shard)).sort()).toEqual([...before, user].sort());
    expect(heldClaims(m.dir, shard)?.nats).not.toHaveProperty("tags");
    expect(heldRevocations(m.dir, "NODES")).toEqual({});
    expect(revoked(pending)).toBe(true);
    await expect(dialAs(pending)).rejects.toThrow(/authentication|authorization/i);
  }, 300_000);
});

describe("with no enrolment since", () => {
  it("ENROL's list is pruned to \"*\" once the last batch's users are past the margin", async () => {
    // the last batch (node rm's test) left its users' entries; `mesh up` pushes once more after the margin
    await waitFor(
      () => Object.keys(heldRevocations(m.dir, "ENROL")).join() === "*",
      ENROL_PRUNE_AFTER_MS + EVENT_WAIT_MS,
      'ENROL\'s list to be "*" alone',
    );
    expect(heldRevocations(m.dir, "ENROL")["*"]).toBeGreaterThan(0);
  }, 300_000);
});

describe("a restart of mesh up", () => {
  it("keeps every revocation: a spent code stays cut, a shard's and ENROL's lists are what they were", async () => {
    const code = await addNode(m.dir, "restart-1");
    expect(await enrol(code)).toBe("ok");
    await waitFor(() => revoked(code), EVENT_WAIT_MS, "ENROL to revoke restart-1's spent code");
    // node rm's test above revoked gone-1 in its shard
    const shard = shardOf("gone-1");
    const before = { nodes: heldRevocations(m.dir, shard), enrol: heldRevocations(m.dir, "ENROL") };
    expect(Object.keys(before.nodes).length).toBeGreaterThan(0);
    // the servers start again from their configuration, which preloads each account's claims
    await m.up.stop();
    m.keep(await meshUp(m.dir));
    expect(heldRevocations(m.dir, shard)).toEqual(before.nodes);
    expect(heldRevocations(m.dir, "ENROL")).toEqual(before.enrol);
    await expect(dialAs(code)).rejects.toThrow(/authentication|authorization/i);
  }, 300_000);
});
