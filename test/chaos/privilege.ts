// Scenario 8, least privilege: the node's server user has exactly protocol.md's permissions (the bus scenarios
// check it for each node they run; here for a node of its own), and every wider act, tried on the node's own
// pinned connection, is refused by the server.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { dial } from "../../src/link/dial.ts";
import type { MeshDouble } from "../mesh/index.ts";
import { permissionProblems, withMesh } from "./bus.ts";
import { type Outcome, type RunOptions, type Scenario, Tally } from "./support.ts";

const NODE = "narrow";
/**
 * How long the server has to answer a wider act: a refusal is its -ERR, which a busy machine may deliver late,
 * so this is long; silence for all of it counts as refused (an act the server allowed is answered well within it).
 */
const ANSWER_WAIT_MS = 20_000;
/** A JetStream publish's own wait for its ack: shorter than ANSWER_WAIT_MS, so a refusal says which it was. */
const PUBLISH_WAIT_MS = 15_000;

/** A promise the server must refuse: rejected with a permissions violation, or never answered. */
async function refused(what: Promise<unknown>): Promise<string[]> {
  const outcome = await Promise.race([
    what.then(
      () => "done",
      (e: Error) =>
        /Permissions Violation|permission/i.test(e.message) ? "refused" : `failed otherwise: ${e.message}`,
    ),
    new Promise<string>((r) => setTimeout(() => r("refused"), ANSWER_WAIT_MS)),
  ]);
  return outcome === "refused" ? [] : [outcome === "done" ? "the server allowed it" : outcome];
}

async function subscribeRefused(nc: NatsConnection, subject: string): Promise<string[]> {
  const sub = nc.subscribe(subject);
  const closed = await Promise.race([
    sub.closed,
    new Promise<"open">((r) => setTimeout(() => r("open"), ANSWER_WAIT_MS)),
  ]);
  if (closed === "open") {
    sub.unsubscribe();
    return [`the subscription to ${subject} stayed open`];
  }
  return closed instanceof Error && /Permissions Violation/.test(closed.message)
    ? []
    : [`closed without a refusal: ${String(closed)}`];
}

async function wider(mesh: MeshDouble): Promise<[string, (nc: NatsConnection) => Promise<string[]>][]> {
  await mesh.admit("other");
  return [
    [
      "creating a consumer",
      async (nc) =>
        refused(
          (await jetstreamManager(nc, { checkAPI: false })).consumers.add("DECLARE", {
            durable_name: `node-${NODE}-2`,
          }),
        ),
    ],
    [
      "publishing another node's report",
      async (nc) => refused(jetstream(nc).publish("mesh.report.other", "{}", { timeout: PUBLISH_WAIT_MS })),
    ],
    [
      "publishing a declaration to itself",
      async (nc) =>
        refused(jetstream(nc).publish(`mesh.declare.${NODE}`, "{}", { timeout: PUBLISH_WAIT_MS })),
    ],
    [
      "reading the DECLARE stream's info",
      async (nc) => refused((await jetstreamManager(nc, { checkAPI: false })).streams.info("DECLARE")),
    ],
    [
      "reading another node's consumer",
      async (nc) =>
        refused((await jetstreamManager(nc, { checkAPI: false })).consumers.info("DECLARE", "node-other")),
    ],
    [
      "deleting its own consumer",
      async (nc) =>
        refused(
          (await jetstreamManager(nc, { checkAPI: false })).consumers.delete("DECLARE", `node-${NODE}`),
        ),
    ],
    ["subscribing to every declaration", (nc) => subscribeRefused(nc, "mesh.declare.>")],
    ["subscribing to another node's inbox", (nc) => subscribeRefused(nc, "_INBOX.node.other.>")],
    ["subscribing to the reports", (nc) => subscribeRefused(nc, "mesh.report.>")],
  ];
}

export const leastPrivilege: Scenario = {
  key: "least-privilege",
  title: "8 least privilege (exact permissions, wider acts refused)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 3 : 1;
    await withMesh(async (mesh) => {
      const m = await mesh.admit(NODE);
      await tally.try("the node's user holds exactly protocol.md's permissions", () =>
        permissionProblems(mesh, NODE),
      );
      const acts = await wider(mesh);
      for (let n = 0; n < rounds; n++)
        for (const [what, act] of acts) {
          // a fresh pinned connection each time: a violation must not leave the next act on a broken one
          const dialled = await dial({
            servers: m.servers,
            fingerprint: m.fingerprint,
            auth: mesh.nodeAuth(NODE),
            inboxPrefix: `_INBOX.node.${NODE}`,
          });
          if (!dialled.ok) {
            await tally.try(what, () => [`the node could not dial: ${dialled.reason}`]);
            continue;
          }
          try {
            await tally.try(`round ${n}: ${what} is refused`, () => act(dialled.nc));
          } finally {
            await dialled.nc.close().catch(() => {});
          }
        }
      opts.progress?.("least-privilege done");
    });
    return tally.outcome();
  },
};
