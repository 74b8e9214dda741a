// What the mesh grants a node's user and its enrolling user (protocol.md "The node's permissions"), and no
// more. test/fixtures/node-permissions.json states the same sets; a test holds this file to it. A node subscribes
// `mesh.plan.<n>` (the mesh asks it for a plan there) and answers on the request's reply (its user JWT allows one
// response per request).

export interface Permissions {
  publish: { allow: string[] };
  subscribe: { allow: string[] };
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
      ],
    },
    subscribe: { allow: [`_INBOX.node.${node}.>`, `mesh.plan.${node}`] },
  };
}

export function enrolPermissions(node: string): Permissions {
  return {
    publish: { allow: [`mesh.enrol.${node}`] },
    subscribe: { allow: [`_INBOX.enrol.${node}.>`] },
  };
}
