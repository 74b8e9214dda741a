// A node behind its last push, woken again by the controller (src/mesh/rewake.ts), against a real nats-server and
// its DECLARE stream: heartbeats are fed in with a clock the test moves, and what is woken is heard on the bus.
import type { Msg } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REWAKE_AFTER_MS, REWAKE_TRIES } from "../../src/defaults.ts";
import { newRecord } from "../../src/mesh/nodes.ts";
import { Rewakes } from "../../src/mesh/rewake.ts";
import type { NodeRecord } from "../../src/mesh/state.ts";
import type { Heartbeat } from "../../src/vocabulary/index.ts";
import { MeshDouble } from "./index.ts";

const declaration = (node: string, n: number) => ({
  v: 1,
  node,
  mode: "converged",
  resources: [{ id: "motd", type: "file", path: "/etc/motd", content: `declaration ${n}\n` }],
});

let mesh: MeshDouble;
const wakes: Msg[] = [];
beforeAll(async () => {
  mesh = await MeshDouble.start();
  mesh.nc.subscribe("mesh.wake.>", {
    callback: (_e, m) => {
      wakes.push(m);
    },
  });
  await mesh.nc.flush();
});
afterAll(async () => {
  await mesh?.stop();
});

const heartbeat = (node: string, seq: number | null): Heartbeat => ({
  v: 1,
  node,
  at: new Date().toISOString(),
  version: "test",
  uptime_s: 1,
  last: seq === null ? null : { seq, outcome: "applied", at: new Date().toISOString() },
  confirmed: true,
});

/** A record whose last push is serial `serial`, its stream sequence `seq` (null: not recorded). */
function recordOf(node: string, serial: number, seq: number | null): NodeRecord {
  const push = { serial, digest: `d${serial}`, seq, at: new Date().toISOString() };
  return { ...newRecord(node), serial, pushes: [push] };
}

/** Wake-ups heard for `node` once the bus has carried everything published so far. */
async function wakesOf(node: string): Promise<Msg[]> {
  await mesh.nc.flush();
  return wakes.filter((m) => m.subject === `mesh.wake.${node}`);
}

describe("Rewakes: a node whose heartbeats stay behind its last push", () => {
  it("is woken once it has been behind a whole REWAKE_AFTER_MS, with the bytes the stream holds, at most REWAKE_TRIES times", async () => {
    const older = await mesh.declare("r-1", declaration("r-1", 1));
    const newer = await mesh.declare("r-1", declaration("r-1", 2));
    await wakesOf("r-1");
    wakes.length = 0;
    let now = Date.now();
    const woke: string[] = [];
    const rewakes = new Rewakes(
      mesh,
      (node, serial, heard) => woke.push(`${node} ${serial} ${heard}`),
      () => now,
    );
    const record = recordOf("r-1", 2, newer);
    // the push a moment old, then behind only a moment: a node still applying, or about to read it
    await rewakes.heard("r-1", heartbeat("r-1", older), record);
    now += REWAKE_AFTER_MS / 2;
    await rewakes.heard("r-1", heartbeat("r-1", older), record);
    expect(await wakesOf("r-1")).toHaveLength(0);
    now += REWAKE_AFTER_MS;
    await rewakes.heard("r-1", heartbeat("r-1", older), record);
    expect(await wakesOf("r-1")).toHaveLength(1);
    const stored = await mesh.jsm.streams.getMessage("DECLARE", { seq: newer });
    expect(Buffer.from((await wakesOf("r-1"))[0]!.data).equals(Buffer.from(stored!.data))).toBe(true);
    expect(woke).toEqual([`r-1 2 ${older}`]);
    // not again within REWAKE_AFTER_MS of the last; then again, up to REWAKE_TRIES in all
    now += REWAKE_AFTER_MS / 2;
    await rewakes.heard("r-1", heartbeat("r-1", older), record);
    for (let i = 0; i < REWAKE_TRIES + 2; i++) {
      now += REWAKE_AFTER_MS;
      await rewakes.heard("r-1", heartbeat("r-1", older), record);
      expect(woke).toHaveLength(Math.min(i + 2, REWAKE_TRIES));
    }
    expect(await wakesOf("r-1")).toHaveLength(REWAKE_TRIES);
  });

  it("is not woken once its heartbeat names the last push, and is woken again for the next push behind", async () => {
    const first = await mesh.declare("r-2", declaration("r-2", 1));
    let now = Date.now();
    const woke: number[] = [];
    const rewakes = new Rewakes(
      mesh,
      (_node, serial) => woke.push(serial),
      () => now,
    );
    now += 2 * REWAKE_AFTER_MS;
    for (let i = 0; i < 3; i++, now += REWAKE_AFTER_MS)
      await rewakes.heard("r-2", heartbeat("r-2", first), recordOf("r-2", 1, first));
    const second = await mesh.declare("r-2", declaration("r-2", 2));
    const record = recordOf("r-2", 2, second);
    // behind from its first heartbeat on: woken at the one a whole REWAKE_AFTER_MS later
    for (let i = 0; i < 2; i++, now += REWAKE_AFTER_MS)
      await rewakes.heard("r-2", heartbeat("r-2", first), record);
    expect(woke).toEqual([2]);
  });

  it("is not woken at the first heartbeat of a link behind a long-past push: its read at the dial may find it yet", async () => {
    const older = await mesh.declare("r-5", declaration("r-5", 1));
    const newer = await mesh.declare("r-5", declaration("r-5", 2));
    let now = Date.now();
    const woke: number[] = [];
    const rewakes = new Rewakes(
      mesh,
      (_node, serial) => woke.push(serial),
      () => now,
    );
    const record = recordOf("r-5", 2, newer);
    await rewakes.heard("r-5", heartbeat("r-5", older), record);
    now += REWAKE_AFTER_MS / 2;
    await rewakes.heard("r-5", heartbeat("r-5", older), record);
    // it read it: behind no longer, and a later heartbeat behind (a stale one delivered late) starts afresh
    await rewakes.heard("r-5", heartbeat("r-5", newer), record);
    now += REWAKE_AFTER_MS;
    await rewakes.heard("r-5", heartbeat("r-5", older), record);
    expect(woke).toEqual([]);
    now += REWAKE_AFTER_MS;
    await rewakes.heard("r-5", heartbeat("r-5", older), record);
    expect(woke).toEqual([2]);
  });

  it("asks the stream when the push's sequence was never recorded, and wakes no node that holds the last already", async () => {
    const only = await mesh.declare("r-3", declaration("r-3", 1));
    await wakesOf("r-3");
    wakes.length = 0;
    let now = Date.now();
    const woke: number[] = [];
    const rewakes = new Rewakes(
      mesh,
      (_node, serial) => woke.push(serial),
      () => now,
    );
    const record = recordOf("r-3", 1, null);
    for (let i = 0; i < REWAKE_TRIES + 3; i++, now += REWAKE_AFTER_MS)
      await rewakes.heard("r-3", heartbeat("r-3", only), record);
    // a node never heard applying anything is behind a push whose sequence is unknown: woken
    const fresh = await mesh.declare("r-4", declaration("r-4", 1));
    const unrecorded = recordOf("r-4", 1, null);
    for (let i = 0; i < 2; i++, now += REWAKE_AFTER_MS)
      await rewakes.heard("r-4", heartbeat("r-4", null), unrecorded);
    expect(woke).toEqual([1]);
    expect(await wakesOf("r-3")).toHaveLength(0);
    const [wake] = await wakesOf("r-4");
    const stored = await mesh.jsm.streams.getMessage("DECLARE", { seq: fresh });
    expect(Buffer.from(wake!.data).equals(Buffer.from(stored!.data))).toBe(true);
  });
});
