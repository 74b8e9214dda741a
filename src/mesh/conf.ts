// The nats-server configuration of each server of the mesh: TLS without `verify` (a node pins the certificate and
// signs the server's nonce with its own key, never a client certificate); decentralized authentication — the
// operator's JWT, the system account, the `full` account resolver keeping every account's newest claims in the
// server's own directory (a revocation pushed to one server reaches the others), the accounts' JWTs as `init` made
// them preloaded. No user and no password is in it: `node add` and `node rm` never rewrite it. In a cluster, the
// routes authenticate by mutual TLS with the mesh's own certificate (the only CA they trust), no password.
import { isIP } from "node:net";
import {
  RESOLVER_FETCH_S,
  RESOLVER_PRELOAD_IAT_S,
  ROUTE_PORT_OFFSET,
  SERVER_JETSTREAM_DISK,
  SERVER_JETSTREAM_MEMORY,
  SERVER_PING_INTERVAL_S,
  SERVER_TLS_TIMEOUT_S,
} from "../defaults.ts";
import { type AccountKeys, accountId, accountJwt, nodesAccountJwt, operatorJwt } from "./accounts.ts";
import type { MeshConfig, MeshDir } from "./layout.ts";
import { NO_REVOCATIONS } from "./revocations.ts";
import { nodesAccountId, SHARDS } from "./shards.ts";

/** An IP given is listened on; a name may not resolve to this machine (NAT, a proxy), so all addresses are. */
function bindOf(host: string): string {
  return isIP(host) ? host : "0.0.0.0";
}

/** The lines that make a server one of this operator's: its JWT, the system account, the resolver, the accounts. */
export function authLines(keys: AccountKeys, resolverDir: string): string[] {
  const q = JSON.stringify;
  // the accounts whose claims carry revocations never outrank the newest pushed (RESOLVER_PRELOAD_IAT_S)
  const iat = {
    system: undefined,
    mesh: undefined,
    nodes: RESOLVER_PRELOAD_IAT_S,
    enrol: RESOLVER_PRELOAD_IAT_S,
  };
  const preload = [
    ...(["system", "mesh", "nodes", "enrol"] as const).map(
      (kind) => `  ${accountId(keys, kind)}: ${q(accountJwt(keys, kind, NO_REVOCATIONS, iat[kind]))}`,
    ),
    ...SHARDS.map(
      (shard) =>
        `  ${nodesAccountId(keys, shard)}: ${q(nodesAccountJwt(keys, shard, NO_REVOCATIONS, RESOLVER_PRELOAD_IAT_S))}`,
    ),
  ];
  return [
    `operator: ${q(operatorJwt(keys))}`,
    `system_account: ${q(accountId(keys, "system"))}`,
    `resolver: { type: full, dir: ${q(resolverDir)}, allow_delete: false, interval: "2m", timeout: "${RESOLVER_FETCH_S}s" }`,
    "resolver_preload: {",
    ...preload,
    "}",
  ];
}

/** Server `i` (from 1, in `init`'s order). Quoted strings are literal in the config language: no `$` surprises. */
export function serverConf(
  mesh: MeshDir,
  config: Pick<MeshConfig, "servers">,
  keys: AccountKeys,
  i: number,
): string {
  const me = config.servers[i - 1]!;
  const dir = mesh.serverDir(i);
  const q = JSON.stringify;
  const lines = [
    "# Written by `mesh-host mesh init`; nothing rewrites it: clients sign in with JWTs, revoked in the resolver.",
    `server_name: ${q(`mesh-${i}`)}`,
    `listen: ${q(`${bindOf(me.host)}:${me.port}`)}`,
    `pid_file: ${q(`${dir}/server.pid`)}`,
    `log_file: ${q(`${dir}/server.log`)}`,
    `ping_interval: "${SERVER_PING_INTERVAL_S}s"`,
    "tls {",
    `  cert_file: ${q(mesh.path("tls", "cert.pem"))}`,
    `  key_file: ${q(mesh.path("tls", "key.pem"))}`,
    `  timeout: ${SERVER_TLS_TIMEOUT_S}`,
    "}",
    "jetstream {",
    `  store_dir: ${q(`${dir}/jetstream`)}`,
    `  max_memory_store: ${SERVER_JETSTREAM_MEMORY}`,
    `  max_file_store: ${SERVER_JETSTREAM_DISK}`,
    "}",
    ...authLines(keys, `${dir}/jwt`),
  ];
  if (config.servers.length > 1) {
    const routes = config.servers
      .filter((_, j) => j !== i - 1)
      .map((s) => q(`nats-route://${s.host}:${s.port + ROUTE_PORT_OFFSET}`));
    lines.push(
      "cluster {",
      '  name: "mesh"',
      `  listen: ${q(`${bindOf(me.host)}:${me.port + ROUTE_PORT_OFFSET}`)}`,
      "  tls {",
      `    cert_file: ${q(mesh.path("tls", "cert.pem"))}`,
      `    key_file: ${q(mesh.path("tls", "key.pem"))}`,
      `    ca_file: ${q(mesh.path("tls", "cert.pem"))}`,
      // a route must show the mesh's own certificate: the only credential a route has
      "    verify: true",
      `    timeout: ${SERVER_TLS_TIMEOUT_S}`,
      "  }",
      `  routes: [${routes.join(", ")}]`,
      "}",
    );
  }
  return `${lines.join("\n")}\n`;
}
