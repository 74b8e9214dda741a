// What the mesh grants a node's user and its enrolling user (protocol.md "The node's permissions"), and no
// more. test/fixtures/node-permissions.json states the same sets; a test holds this file to it. A node subscribes
// `mesh.plan.<n>` (the mesh asks it for a plan there) and answers on the request's reply (its user JWT allows one
// response per request).

import { RELEASE_DIRECT_GET } from "../vocabulary/index.ts";

export interface Permissions {
  publish: { allow: string[] };
  subscribe: { allow: string[] };
  /** May answer a request it received, once, on the request's reply address (a plan's answer). */
  allow_responses?: boolean;
}

export function nodePermissions(node: string): Permissions {
  return {
    publish: {
      allow: [
        `mesh.report.${node}`,
        `mesh.heartbeat.${node}`,
        `mesh.rekey.${node}`,
        `$JS.API.CONSUMER.INFO.DECLARE.node-${node}`,
        `$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${node}`,
        `$JS.ACK.DECLARE.node-${node}.>`,
        // releases: direct gets on the release stream, the one JetStream read that creates nothing
        RELEASE_DIRECT_GET,
      ],
    },
    // the mesh's plan requests, answered on their reply address and nowhere else
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
