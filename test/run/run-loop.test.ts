// The run loop's decisions, with its link port given in memory: newest wins, superseded settled like applied.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeHost } from "../../src/hosts/index.ts";
import type { Delivered } from "../../src/link/index.ts";
import { type LinkPort, RunLoop } from "../../src/run/index.ts";
import { ensureKeys, Outbox, publicKeys, State, StoreOriginals } from "../../src/store/index.ts";
import { localExec } from "../../src/system/index.ts";

import { makeMeshKey, type Report, signEnvelope } from "../../src/vocabulary/index.ts";
import { tempDir } from "../support/tmp.ts";

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

describe("the run loop, one link's life", () => {
  // The stream keeps one message per subject, so on a real bus a newer declaration replaces an undelivered
  // older one; the "superseded" path is for a message already in hand when a newer arrives, a race a real
  // server cannot be made to lose on purpose. This port stands in for the link to make that moment exact. The
  // server's count alone (`claimed`, stale right after a restart) sets nothing aside: the e2e newest-wins test
  // makes a real server say so.
  it("settles a declaration with a newer one pulled behind it as superseded (acked, never applied), then applies the newest; a count with nothing behind it is applied", async () => {
    const base = tempDir();
    mkdirSync(join(base, "root"));
    const state = new State(join(base, "state"));
    const mesh = makeMeshKey();
    const keys = ensureKeys(state.ensure().dir);
    if (!keys.ok) throw new Error(keys.reason);
    const body = (c: string, serial: number) =>
      JSON.stringify({
        v: 1,
        node: "n1",
        to: publicKeys(keys.keys).identity,
        serial,
        issued_at: new Date().toISOString(),
        mode: "converged",
        resources: [{ id: "f", type: "file", path: "/f", content: c }],
      });
    const settled: string[] = [];
    const said: Report[] = [];
    const settle = (what: string) => {
      settled.push(what);
      return { ok: true } as const;
    };
    const delivery = (seq: number, c: string, newer: number | null, claimed = 0): Delivered => ({
      seq,
      data: Buffer.from(JSON.stringify(signEnvelope(body(c, seq), mesh.privateKey))),
      newer,
      claimed,
      redelivered: false,
      working() {},
      ack: async () => settle(`ack ${seq}`),
      term: async () => settle(`term ${seq}`),
    });
    let loop: RunLoop | null = null;
    const link: LinkPort = {
      async *declarations() {
        yield delivery(1, "old", 2, 1);
        yield delivery(2, "new", null);
        yield delivery(3, "newest", null, 1);
        loop!.stop();
      },
      report: async (r) => {
        said.push(r);
        return { ok: true, seq: r.declaration.seq, duplicate: false };
      },
      heartbeat: () => ({ ok: true }),
      close: async () => {},
    };
    loop = new RunLoop({
      deps: {
        state,
        originals: new StoreOriginals(state),
        outbox: new Outbox(state),
        host: makeHost("linux"),
        ports: { root: join(base, "root"), exec: localExec(), rootless: true, log: quiet },
        unseal: () => ({ ok: false, reason: "none" }),
        node: "n1",
        membership: {
          transport: "nats",
          servers: ["nats://127.0.0.1:1"],
          fingerprint: "0".repeat(64),
          user: "node.n1",
          password: "x",
          stream: "DECLARE",
          consumer: "node-n1",
          subject: "mesh.declare.n1",
          mesh_key: mesh.publicB64,
        },
      },
      dial: async () => ({ ok: true, link }),
      log: quiet,
      heartbeatS: 30,
      redialSpreadS: 1,
      driftS: 300,
    });
    expect(await loop.run()).toBe("stopped");
    expect(settled).toEqual(["ack 1", "ack 2", "ack 3"]);
    expect(said.map((r) => [r.declaration.seq, r.outcome])).toEqual([
      [1, "superseded"],
      [2, "applied"],
      [3, "applied"],
    ]);
  });
});
