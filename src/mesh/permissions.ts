// What the mesh grants a node's user and its enrolling user (protocol.md "The node's permissions"), and no
// more. test/fixtures/node-permissions.json states the same sets; a test holds this file to it. A node subscribes
// `mesh.plan.<n>` (the mesh asks it for a plan there) and answers on the request's reply (its user JWT allows one
// response per request).

import { declareDirectGet, declareSubject, RELEASE_DIRECT_GET } from "../vocabulary/index.ts";

export interface Permissions {
  publish: { allow: string[] };
  subscribe: { allow: string[] };
  /** May answer a request it received, once, on the request's reply address (a plan's answer). */
  allow_responses?: boolean;
}

/**
 * How a node hears its declarations. `direct`: a direct get of the last one on its subject, woken by the wake-up of
 * each (no consumer of its own, so a cluster keeps no Raft group a node). `consumer`: a durable pull consumer the
 * mesh made, as every node enrolled before direct reads does; its user keeps these grants until it enrols again.
 */
export type Reads = "direct" | "consumer";

export function nodePermissions(node: string, reads: Reads = "direct"): Permissions {
  const own = [`mesh.report.${node}`, `mesh.heartbeat.${node}`, `mesh.rekey.${node}`];
  // releases: direct gets on the release stream, the one JetStream read that creates nothing
  if (reads === "direct")
    return {
      publish: { allow: [...own, declareDirectGet(node), RELEASE_DIRECT_GET] },
      // the mesh's plan requests, answered on their reply address and nowhere else; the wake-up of each declaration
      subscribe: { allow: [`_INBOX.node.${node}.>`, `mesh.plan.${node}`, declareSubject(node)] },
      allow_responses: true,
    };
  return {
    publish: {
      allow: [
        ...own,
        `$JS.API.CONSUMER.INFO.DECLARE.node-${node}`,
        `$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${node}`,
        `$JS.ACK.DECLARE.node-${node}.>`,
        RELEASE_DIRECT_GET,
      ],
    },
    subscribe: { allow: [`_INBOX.node.${node}.>`, `mesh.plan.${node}`] },
    allow_responses: true,
  };
}

export function enrolPermissions(node: string): Permissions {
  return {
    publish: { allow: [`mesh.enrol.${node}`] },
    subscribe: { allow: [`_INBOX.enrol.${node}.>`] },
  };
}
