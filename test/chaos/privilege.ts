// Scenario 8, least privilege: the node's server user has exactly protocol.md's permissions (the bus scenarios
// check it for each node they run; here for a node of its own), and every wider act, tried on the node's own
// pinned connection, is refused by the server.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
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
/** How long the answers to a reply trick are given to land (they cross accounts asynchronously). */
const REPLY_SETTLE_MS = 1_000;

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
  // a declaration waiting for the other node: what an overwrite, an ack or a purge by reply would touch
  await mesh.declare("other", { v: 1, node: "other", mode: "converged", resources: [] });
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
    ...REPLY_TRICKS.map(([subject, reply]): [string, (nc: NatsConnection) => Promise<string[]>] => [
      `publishing ${subject} with the reply ${reply}`,
      (nc) => replyHarmless(mesh, nc, subject, reply),
    ]),
  ];
}

/** Issue 28's reply-address tricks: granted subjects, with a reply aimed at the mesh's JetStream API or another node. */
const REPLY_TRICKS: [string, string][] = [
  [`$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${NODE}`, "$JS.API.STREAM.PURGE.REPORTS"],
  [`$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${NODE}`, "$JS.API.CONSUMER.DELETE.DECLARE.node-other"],
  [`$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${NODE}`, "$JS.API.STREAM.DELETE.DECLARE"],
  [`$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${NODE}`, "mesh.declare.other"],
  [`mesh.report.${NODE}`, "$JS.API.STREAM.PURGE.DECLARE"],
  [`mesh.report.${NODE}`, "mesh.report.other"],
  [`mesh.heartbeat.${NODE}`, "mesh.enrol.other"],
];

/** The trick played: the streams, the other node's consumer and its declaration are exactly as before. */
async function replyHarmless(
  mesh: MeshDouble,
  nc: NatsConnection,
  subject: string,
  reply: string,
): Promise<string[]> {
  const before = await busShape(mesh);
  const body = subject.includes("MSG.NEXT") ? JSON.stringify({ batch: 1, no_wait: true }) : "{}";
  nc.publish(subject, body, { reply });
  await nc.flush().catch(() => undefined);
  // the answers cross accounts asynchronously: a bound for them to land, not a pace
  await new Promise((r) => setTimeout(r, REPLY_SETTLE_MS));
  const after = await busShape(mesh);
  return before === after ? [] : [`the bus changed: ${before} → ${after}`];
}

async function busShape(mesh: MeshDouble): Promise<string> {
  const streams: string[] = [];
  for (const name of ["DECLARE", "REPORTS", "ENROL", "REKEY"]) {
    const info = await mesh.jsm.streams.info(name).catch(() => null);
    streams.push(`${name}:${info ? info.state.last_seq - info.state.messages : "gone"}`);
  }
  const other = await mesh.consumerInfo("other").then(
    (i) => `node-other:${i.num_pending + i.num_ack_pending}`,
    () => "node-other:gone",
  );
  const declared = await mesh.declared("other");
  return `${streams.join(" ")} ${other} declare.other:${declared.lastSeq}`;
}

export const leastPrivilege: Scenario = {
  key: "least-privilege",
  title: "8 least privilege (exact permissions, wider acts refused)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const rounds = opts.long ? 3 : 1;
    await withMesh(async (mesh) => {
      await mesh.admit(NODE);
      await tally.try("the node's user holds exactly protocol.md's permissions", () =>
        permissionProblems(mesh, NODE),
      );
      const acts = await wider(mesh);
      for (let n = 0; n < rounds; n++)
        for (const [what, act] of acts) {
          // a fresh pinned connection each time: a violation must not leave the next act on a broken one
          const dialled = await mesh.dialAs(NODE);
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
