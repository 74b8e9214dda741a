// Newest wins against a real nats-server that miscounts: right after a restart, nats-server 2.9 can hand a node
// its newest declaration saying one more waits behind it when none does. Its running tally of what a consumer has
// pending starts from the consumer's state on disk, which it writes at most ten times a second: a server killed
// just after a node acked two declarations comes back with the consumer one behind, counting the older one, and
// when the next declaration replaces it the tally keeps both. A node that took that count as a fact settled the
// newest declaration as superseded and never applied it (seen once in the bus-faults chaos). Here a link as the
// node acks two declarations as fast as it can, the server is SIGKILLed at once, and once its consumer is seen
// behind (the event this waits on; tried again when the kill came after the write), the node's link binds, the
// next declaration is pushed, and the run loop hears it over that link with the server's count saying one more
// waits: it must apply it all the same.
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeHost } from "../../src/hosts/index.ts";
import { type Delivered, type Link, openBound } from "../../src/link/index.ts";
import { RunLoop } from "../../src/run/index.ts";
import { loadIdentity, Outbox, State, StoreOriginals } from "../../src/store/index.ts";
import { localExec } from "../../src/system/index.ts";
import type { Report } from "../../src/vocabulary/index.ts";
import { serverPid } from "../chaos/bus.ts";
import { EVENT_WAIT_MS, MeshDouble, waitFor } from "../mesh/index.ts";
import { runCli } from "../support/cli.ts";
import { confDecl } from "../support/offline.ts";
import { useBuiltExecutable } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

// enrolment through the built executable, as a node is made
useBuiltExecutable();

/** How many kills to try for one that lands before the server wrote the consumer's state: a bound, not a pace. */
const KILLS = 10;
const NODE = "stale";

let mesh: MeshDouble;
beforeAll(async () => {
  mesh = await MeshDouble.start();
});
afterAll(async () => {
  await mesh?.stop();
});

/** The next delivery, waited for as long as an event is. */
async function heard(link: Link): Promise<Delivered> {
  const it = link.declarations()[Symbol.asyncIterator]();
  const next = await Promise.race([
    it.next(),
    new Promise<"nothing">((r) => setTimeout(() => r("nothing"), EVENT_WAIT_MS)),
  ]);
  if (next === "nothing" || next.done) throw new Error("no declaration delivered");
  return next.value;
}

/** A link as the node: its own user and identity key, bound to its consumer (which asks the consumer's info). */
async function nodeLink(state: string): Promise<Link> {
  const membership = new State(state).readMembership()!;
  const identity = loadIdentity(state);
  if (!identity.ok) throw new Error(identity.reason);
  const opened = await openBound(membership, NODE, identity.pair.privateKey);
  if (!opened.ok) throw new Error(opened.reason);
  return opened.link;
}

/**
 * Two declarations heard and acked by a link as the node, then the server SIGKILLed and started again; whether
 * it came back with the consumer behind the last one acked.
 */
async function killedJustAfterAcks(state: string, n: number): Promise<boolean> {
  const link = await nodeLink(state);
  let last = 0;
  for (const k of [1, 2]) {
    last = await mesh.declare(NODE, confDecl(NODE, `round ${n}.${k}\n`));
    const d = await heard(link);
    expect(d.seq).toBe(last);
    expect(await d.ack()).toEqual({ ok: true });
  }
  process.kill(serverPid(mesh.server.confFile), "SIGKILL");
  await waitFor(() => !mesh.server.running, EVENT_WAIT_MS, "the SIGKILLed server gone");
  await link.close();
  await mesh.startServer();
  return (await mesh.consumerInfo(NODE)).delivered.stream_seq < last;
}

/** The node's run loop, in this process, over `link`, applying into `root`: what it logs, and its reports. */
function loopOver(link: Link, state: string, root: string) {
  const logged: object[] = [];
  const log = (fields: object, msg?: string) => logged.push({ ...fields, msg });
  const logger = { info: log, warn: log, error: log, debug: log };
  const st = new State(state);
  const loop = new RunLoop({
    deps: {
      state: st,
      originals: new StoreOriginals(st),
      outbox: new Outbox(st),
      host: makeHost("linux"),
      ports: { root, exec: localExec(), rootless: true, log: logger },
      unseal: () => ({ ok: false, reason: "nothing sealed here" }),
      node: NODE,
      membership: st.readMembership()!,
    },
    // the one link, bound already; once it is gone the loop is stopped, never dialling again
    dial: async () => ({ ok: true, link }),
    onDialFailed: () => "stop",
    log: logger,
    heartbeatS: 30,
    redialSpreadS: 1,
    driftS: 600,
  });
  return { loop, logged, running: loop.run() };
}

describe("newest wins over a stale count", () => {
  it("applies the newest declaration when the restarted server says another waits behind it and none does", async () => {
    const base = tempDir();
    const state = join(base, "state");
    const root = join(base, "root");
    mkdirSync(root);
    const { code } = await mesh.enrolmentCode(NODE);
    const enrol = await runCli(["enrol", code, "--state", state, "--root", root]);
    expect(enrol.code, enrol.stderr).toBe(0);
    let behind = false;
    for (let n = 0; n < KILLS && !behind; n++) behind = await killedJustAfterAcks(state, n);
    expect(behind, `the server wrote the consumer's state before each of ${KILLS} kills`).toBe(true);
    // the node's link comes back and binds before the push, as a node's does when its server restarts
    const link = await nodeLink(state);
    const seq = await mesh.declare(NODE, confDecl(NODE, "newest\n"));
    const { loop, logged, running } = loopOver(link, state, root);
    try {
      const report = await mesh.awaitReport(1, { node: NODE });
      // the count the server handed it with: the miscount itself, or this test proves nothing
      expect(logged).toContainEqual(expect.objectContaining({ seq, claimed: 1 }));
      expect((report.value as Report).declaration.seq).toBe(seq);
      expect(report.value).toMatchObject({ outcome: "applied" });
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("newest\n");
    } finally {
      loop.stop();
      await running;
    }
  });
});
