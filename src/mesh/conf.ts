// The nats-server configuration of each server of the mesh, and the one user list they all include.
// TLS without `verify` (a node pins the certificate and brings a password, never a client certificate);
// one account with JetStream; in a cluster, routes authenticated by a password over TLS that trusts only the
// mesh's own certificate.
import { isIP } from "node:net";
import { ROUTE_PORT_OFFSET } from "../defaults.ts";
import { CONTROLLER_USER, enrolUser, nodeUser, ROUTE_USER } from "../vocabulary/index.ts";
import type { MeshConfig, MeshDir, MeshSecrets } from "./layout.ts";
import { enrolPermissions, nodePermissions, type Permissions } from "./permissions.ts";
import type { CodeRecord, NodeRecord } from "./state.ts";

export interface ServerUser {
  user: string;
  password: string;
  /** Absent: every subject (the controller). */
  permissions?: Permissions;
}

/** An IP given is listened on; a name may not resolve to this machine (NAT, a proxy), so all addresses are. */
function bindOf(host: string): string {
  return isIP(host) ? host : "0.0.0.0";
}

/** Server `i` (from 1, in `init`'s order). Quoted strings are literal in the config language: no `$` surprises. */
export function serverConf(
  mesh: MeshDir,
  config: Pick<MeshConfig, "servers">,
  secrets: MeshSecrets,
  i: number,
): string {
  const me = config.servers[i - 1]!;
  const dir = mesh.serverDir(i);
  const q = JSON.stringify;
  const lines = [
    "# Written by `mesh-host mesh init`; the user list beside it is rewritten by `mesh node add|rm`.",
    `server_name: ${q(`mesh-${i}`)}`,
    `listen: ${q(`${bindOf(me.host)}:${me.port}`)}`,
    `pid_file: ${q(`${dir}/server.pid`)}`,
    `log_file: ${q(`${dir}/server.log`)}`,
    'ping_interval: "20s"',
    "tls {",
    `  cert_file: ${q(mesh.path("tls", "cert.pem"))}`,
    `  key_file: ${q(mesh.path("tls", "key.pem"))}`,
    "  timeout: 2",
    "}",
    "jetstream {",
    `  store_dir: ${q(`${dir}/jetstream`)}`,
    "  max_memory_store: 64MB",
    "  max_file_store: 1GB",
    "}",
    "accounts {",
    '  include "users.conf"',
    "}",
  ];
  if (config.servers.length > 1) {
    const routes = config.servers
      .filter((_, j) => j !== i - 1)
      .map((s) => q(`nats-route://${ROUTE_USER}:${secrets.route}@${s.host}:${s.port + ROUTE_PORT_OFFSET}`));
    lines.push(
      "cluster {",
      '  name: "mesh"',
      `  listen: ${q(`${bindOf(me.host)}:${me.port + ROUTE_PORT_OFFSET}`)}`,
      `  authorization { user: ${q(ROUTE_USER)}, password: ${q(secrets.route)} }`,
      "  tls {",
      `    cert_file: ${q(mesh.path("tls", "cert.pem"))}`,
      `    key_file: ${q(mesh.path("tls", "key.pem"))}`,
      `    ca_file: ${q(mesh.path("tls", "cert.pem"))}`,
      "    timeout: 2",
      "  }",
      `  routes: [${routes.join(", ")}]`,
      "}",
    );
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Every user the servers know: the controller, each node's user, each code of a node in the mesh (until the
 * node is first heard as itself: withdrawing it at the question would cut the answer's connection).
 */
export function meshUsers(secrets: MeshSecrets, nodes: NodeRecord[], codes: CodeRecord[] = []): ServerUser[] {
  const users: ServerUser[] = [{ user: CONTROLLER_USER, password: secrets.controller }];
  const known = new Set(nodes.map((n) => n.node));
  for (const n of nodes)
    users.push({ user: nodeUser(n.node), password: n.password, permissions: nodePermissions(n.node) });
  for (const c of codes)
    if (known.has(c.node))
      users.push({ user: enrolUser(c.node), password: c.token, permissions: enrolPermissions(c.node) });
  return users;
}

/** The account block `server.conf` includes: one account, JetStream on, the users as JSON objects. */
export function usersConf(users: ServerUser[]): string {
  const lines = users.map((u) => `    ${JSON.stringify(u)}`);
  return `MESH {\n  jetstream: enabled\n  users: [\n${lines.join("\n")}\n  ]\n}\n`;
}
