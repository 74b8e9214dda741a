// What `mesh-host run` does with declarations, without the bus: the real RunLoop, fed by a link that delivers
// signed envelopes read from files, one after the other, then stops. Scenario 5 runs `reconcile` against it.
// Beside the real `run` on the mesh double (concurrency.ts does both), this one places `reconcile` between two
// deliveries exactly, with no bus timing in the way.
// argv: STATE ROOT SEQ:ENVELOPE_FILE…
import { readFileSync } from "node:fs";
import { unsealerFor } from "../../src/cli/unseal.ts";
import { makeHost } from "../../src/hosts/index.ts";
import type { Delivered } from "../../src/link/index.ts";
import { type LinkPort, RunLoop } from "../../src/run/index.ts";
import { Outbox, State, StoreOriginals } from "../../src/store/index.ts";
import { localExec } from "../../src/system/index.ts";

const [stateDir, root, ...given] = process.argv.slice(2) as [string, string, ...string[]];
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const state = new State(stateDir);
const membership = state.readMembership();
const node = state.readNode();
if (!membership || !node) throw new Error("run-child: the state holds no membership or node");
const host = makeHost("linux");

const deliveries: Delivered[] = given.map((arg) => {
  const at = arg.indexOf(":");
  return {
    seq: Number(arg.slice(0, at)),
    data: readFileSync(arg.slice(at + 1)),
    newer: null,
    claimed: 0,
    redelivered: false,
    working() {},
    ack: async () => ({ ok: true }),
    term: async () => ({ ok: true }),
  };
});

const reports: string[] = [];
let loop: RunLoop;
const link: LinkPort = {
  async *declarations() {
    for (const d of deliveries) {
      process.stdout.write(`delivering ${d.seq}\n`);
      yield d;
    }
    loop.stop();
  },
  async report(r) {
    reports.push(`${r.declaration.seq}:${r.outcome}`);
    return { ok: true, seq: r.declaration.seq, duplicate: false };
  },
  heartbeat: () => ({ ok: true }),
  async close() {},
};

loop = new RunLoop({
  deps: {
    state,
    originals: new StoreOriginals(state),
    outbox: new Outbox(state),
    host,
    ports: { root, exec: localExec(), rootless: process.getuid?.() !== 0, log: quiet },
    unseal: unsealerFor(state),
    node: node.node,
    membership,
  },
  dial: async () => ({ ok: true, link }),
  log: quiet,
  heartbeatS: 86_400,
  redialSpreadS: 1,
  driftS: 86_400,
});

loop.run().then((reason) => {
  process.stdout.write(`stopped ${reason}; reports ${reports.join(" ")}\n`);
});
