// The bus's accounts (protocol.md "Accounts"): an operator signs the account JWTs, and every user is a JWT
// signed by its account's key — no password anywhere.
//   SYS    the servers' system account: the mesh pushes an account's new claims (a revocation) through it.
//   MESH   JetStream (the streams, the key-value buckets, the object store) and the controller's users.
//   NODES.00 … NODES.7f  the shards: every node's user, in the shard its name hashes to; JetStream off. What a
//          node may do crosses by the exports below, as services: the server gives a service request a reply
//          address of its own making, so no reply a node picks ever reaches MESH's JetStream API (docs/security.md
//          says what was tried). A revocation is its account's claims pushed again, and nats-server applies them
//          by walking every client of the account (decoding each one's user JWT): a shard's, not the fleet's.
//   NODES  the nodes enrolled before the shards (same imports, and those of a consumer a node), until each enrols
//          again.
//   ENROL  every enrolling user (the short-lived user an enrolment code carries); JetStream off; it imports the
//          enrolment service and its answers, nothing else. Apart from NODES so that NODES' claims carry only
//          nodes' revocations: their size grows with nodes removed, never with nodes enrolled. ENROL's own stay
//          bounded by a revocation of every user issued up to a second (`"*"`, revocations.ts enrolRevoked).
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import {
  ENROL_ACCOUNT_MAX_CONNECTIONS,
  ENROL_ACCOUNT_MAX_SUBS,
  ENROL_MAX_PAYLOAD,
  ENROL_MAX_SUBS,
  NODE_MAX_PAYLOAD,
  NODE_MAX_SUBS,
  NODES_MAX_CONNECTIONS,
  NODES_MAX_PAYLOAD,
  NODES_MAX_SUBS,
  PULL_RESPONSE_THRESHOLD_MS,
} from "../defaults.ts";
import {
  enrolUser,
  type KeyPair,
  keyPairOfSeed,
  type NkeyRole,
  nkeyOf,
  nodeUser,
  publicNkey,
  rawKeyFromB64,
  seedOf,
} from "../vocabulary/index.ts";
import { issueJwt } from "./jwt.ts";
import { enrolPermissions, nodePermissions, type Permissions, type Reads } from "./permissions.ts";
import { NO_REVOCATIONS, type Revocations } from "./revocations.ts";
import {
  type NodesAccount,
  nodesAccountFor,
  nodesAccountId,
  nodesAccountPair,
  planSubjectIn,
  SHARDS,
} from "./shards.ts";

export const ACCOUNT_NAMES = { system: "SYS", mesh: "MESH", nodes: "NODES", enrol: "ENROL" } as const;
export type AccountKind = keyof typeof ACCOUNT_NAMES;

/** The two kinds of export and import (a service carries a reply; a stream does not). */
const KIND = { service: "service", stream: "stream" } as const;

/**
 * What nodes publish, exported by MESH as services and imported by NODES and the shards; `consumer`: only a node
 * enrolled before direct reads uses it, in NODES (no shard imports it).
 */
export const NODE_SERVICES: readonly { subject: string; stream?: true; consumer?: true }[] = [
  { subject: "mesh.report.*" },
  { subject: "mesh.heartbeat.*" },
  { subject: "mesh.rekey.*" },
  { subject: "$JS.API.CONSUMER.INFO.DECLARE.*", consumer: true },
  // a pull is answered by many messages (its deliveries, the server's idle heartbeats) over the pull's life
  { subject: "$JS.API.CONSUMER.MSG.NEXT.DECLARE.*", stream: true, consumer: true },
  { subject: "$JS.ACK.DECLARE.>", consumer: true },
  // direct reads: the last declaration on a node's subject (its grants name its own one)
  { subject: "$JS.API.DIRECT.GET.DECLARE.mesh.declare.*" },
  // releases: a node reads its own with a direct get on the object store's stream, creating nothing on the bus
  { subject: "$JS.API.DIRECT.GET.OBJ_mesh-releases" },
  { subject: "$JS.API.DIRECT.GET.OBJ_mesh-releases.>" },
  // No node is granted it. Imported so that NODES gets no JetStream API of its own: nats-server gives every
  // account without JetStream an import of `$JS.API.>` that answers "JetStream not enabled" — first, racing MESH's
  // real answer to a node's consumer info — unless an import already covers `$JS.API.INFO` (2.9's
  // enableJetStreamInfoServiceImportOnly). Tried: without it a node's bind failed.
  { subject: "$JS.API.INFO" },
];
/** The enrolment questions: exported by MESH as a service, imported by ENROL (and NODES, see nodesClaims). */
export const ENROL_SERVICE = "mesh.enrol.*";
/** The enrolment answers: published in MESH, delivered in ENROL (a stream: no reply rides along). */
export const ENROL_ANSWERS = "_INBOX.enrol.>";
/**
 * Each declaration's wake-up (wake.ts): published in MESH once the stream holds the declaration, delivered in each
 * node's account (a stream) on the subject the node subscribes. MESH's own `mesh.declare.*`, the core copy of the
 * publish, is exported to none: it can come before the stream has stored the declaration.
 */
export const DECLARE_WAKE = "mesh.wake.*";
export const WAKE_HEARD_AS = "mesh.declare.*";
/** Plans: MESH asks a node on its own subject; NODES and each shard export it as a service, MESH imports it. */
export const PLAN_SERVICE = "mesh.plan.*";
/**
 * Exported by MESH as a stream, imported by SYS; nothing is published on it. nats-server builds an account on its
 * first use, and the system account's imports at its start: by this one, MESH and every shard it imports from are
 * built once, before the server listens. Without it, MESH was built by whichever came first (a controller's
 * sign-in, JetStream's assignments, a route's interest), a second lookup during that build made another, and a
 * shard bound to the discarded one never carried its node's messages (protocol.md "Shards").
 */
export const MESH_LOAD = "mesh.load";

/** The operator's and each account's Ed25519 pair. Seeds live only in the mesh directory's accounts.json (0600). */
export type AccountKeys = Record<"operator" | AccountKind, KeyPair>;
export type AccountSeeds = Record<"operator" | AccountKind, string>;

function newPair(): KeyPair {
  return generateKeyPairSync("ed25519");
}

export function makeAccountKeys(): AccountKeys {
  return { operator: newPair(), system: newPair(), mesh: newPair(), nodes: newPair(), enrol: newPair() };
}

export function seedsOf(keys: AccountKeys): AccountSeeds {
  return {
    operator: seedOf("operator", keys.operator.privateKey),
    system: seedOf("account", keys.system.privateKey),
    mesh: seedOf("account", keys.mesh.privateKey),
    nodes: seedOf("account", keys.nodes.privateKey),
    enrol: seedOf("account", keys.enrol.privateKey),
  };
}

/** The pairs the seeds spell, or null naming none of them (a seed is never said). */
export function keysOfSeeds(seeds: AccountSeeds): AccountKeys | null {
  const role = (k: keyof AccountSeeds): NkeyRole => (k === "operator" ? "operator" : "account");
  const out: Partial<AccountKeys> = {};
  for (const k of ["operator", "system", "mesh", "nodes", "enrol"] as const) {
    const pair = keyPairOfSeed(role(k), seeds[k]);
    if (!pair) return null;
    out[k] = pair;
  }
  return out as AccountKeys;
}

export function accountId(keys: AccountKeys, kind: AccountKind): string {
  return nkeyOf("account", keys[kind].publicKey);
}

export function operatorJwt(keys: AccountKeys): string {
  const op = keys.operator.privateKey;
  return issueJwt(
    {
      name: "mesh",
      sub: nkeyOf("operator", op),
      nats: { type: "operator", system_account: accountId(keys, "system") },
    },
    op,
    "operator",
  );
}

const UNLIMITED = {
  subs: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
  conn: -1,
  leaf: -1,
};

const serviceImport = (subject: string, account: string) => ({
  name: subject,
  subject,
  account,
  type: KIND.service,
});
/** Each declaration's wake-up (wake.ts), heard by a node on its own `mesh.declare.<n>`. */
const wakeImport = (mesh: string) => ({
  name: DECLARE_WAKE,
  subject: DECLARE_WAKE,
  local_subject: WAKE_HEARD_AS,
  account: mesh,
  type: KIND.stream,
});
const enrolImports = (mesh: string) => [
  serviceImport(ENROL_SERVICE, mesh),
  { name: ENROL_ANSWERS, subject: ENROL_ANSWERS, account: mesh, type: KIND.stream },
];

function meshClaims(keys: AccountKeys): Record<string, unknown> {
  // each shard's plan service under its own prefix (one subject cannot be imported from two accounts)
  const plans = SHARDS.map((shard) => ({
    name: `${PLAN_SERVICE} ${shard}`,
    subject: PLAN_SERVICE,
    local_subject: planSubjectIn(shard, "*"),
    account: nodesAccountId(keys, shard),
    type: KIND.service,
  }));
  return {
    type: "account",
    // JetStream on, bounded per stream (bus.ts) rather than here: the buckets and the release store share it
    limits: { ...UNLIMITED, mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 },
    exports: [
      ...[...NODE_SERVICES, { subject: ENROL_SERVICE }].map((s: { subject: string; stream?: true }) => ({
        name: s.subject,
        subject: s.subject,
        type: KIND.service,
        ...(s.stream
          ? { response_type: "Stream", response_threshold: PULL_RESPONSE_THRESHOLD_MS * 1_000_000 }
          : {}),
      })),
      { name: ENROL_ANSWERS, subject: ENROL_ANSWERS, type: KIND.stream },
      { name: DECLARE_WAKE, subject: DECLARE_WAKE, type: KIND.stream },
      { name: MESH_LOAD, subject: MESH_LOAD, type: KIND.stream },
    ],
    imports: [serviceImport(PLAN_SERVICE, accountId(keys, "nodes")), ...plans],
  };
}

/** SYS: unbounded, and MESH_LOAD, so that MESH and the shards are built at the server's start. */
function systemClaims(keys: AccountKeys): Record<string, unknown> {
  return {
    type: "account",
    limits: UNLIMITED,
    imports: [{ name: MESH_LOAD, subject: MESH_LOAD, account: accountId(keys, "mesh"), type: KIND.stream }],
  };
}

/** A shard: NODES' bounds and exports; the imports of a node reading directly, no more; its revocations. */
function shardClaims(keys: AccountKeys, revoked: Revocations): Record<string, unknown> {
  const mesh = accountId(keys, "mesh");
  return {
    type: "account",
    limits: { ...UNLIMITED, conn: NODES_MAX_CONNECTIONS, subs: NODES_MAX_SUBS, payload: NODES_MAX_PAYLOAD },
    exports: [{ name: PLAN_SERVICE, subject: PLAN_SERVICE, type: KIND.service }],
    imports: [
      ...NODE_SERVICES.filter((s) => !s.consumer).map((s) => serviceImport(s.subject, mesh)),
      wakeImport(mesh),
    ],
    ...(Object.keys(revoked.users).length ? { revocations: revoked.users } : {}),
  };
}

/** NODES: no JetStream, its own bounds, what it imports; `revoked` are users cut off (key → unix seconds). */
function nodesClaims(keys: AccountKeys, revoked: Revocations): Record<string, unknown> {
  const mesh = accountId(keys, "mesh");
  return {
    type: "account",
    limits: {
      ...UNLIMITED,
      conn: NODES_MAX_CONNECTIONS,
      subs: NODES_MAX_SUBS,
      payload: NODES_MAX_PAYLOAD,
    },
    exports: [{ name: PLAN_SERVICE, subject: PLAN_SERVICE, type: KIND.service }],
    imports: [
      ...NODE_SERVICES.map((s) => serviceImport(s.subject, mesh)),
      wakeImport(mesh),
      // for the codes issued before ENROL existed (their enrolling users are NODES'), until each is spent or
      // expired: no node's user is granted either subject (permissions.ts), so a node reaches nothing by them
      ...enrolImports(mesh),
    ],
    ...(Object.keys(revoked.users).length ? { revocations: revoked.users } : {}),
    ...(revoked.enrolling.length
      ? { tags: revoked.enrolling.map((k) => `enrolling:${k.toLowerCase()}`) }
      : {}),
  };
}

/** ENROL: no JetStream, tight bounds, the enrolment service and its answers alone; its revocations (enrolRevoked). */
function enrolClaims(keys: AccountKeys, revoked: Revocations): Record<string, unknown> {
  const imports = enrolImports(accountId(keys, "mesh"));
  return {
    type: "account",
    // the servers hold an account to its counts of imports and exports: none can be added under these claims
    limits: {
      ...UNLIMITED,
      conn: ENROL_ACCOUNT_MAX_CONNECTIONS,
      subs: ENROL_ACCOUNT_MAX_SUBS,
      payload: ENROL_MAX_PAYLOAD,
      imports: imports.length,
      exports: 0,
    },
    imports,
    ...(Object.keys(revoked.users).length ? { revocations: revoked.users } : {}),
  };
}

/** An account's claims signed by the operator, issued now (or at `iat`: conf.ts's preload). */
export function accountJwt(
  keys: AccountKeys,
  kind: AccountKind,
  revoked = NO_REVOCATIONS,
  iat?: number,
): string {
  const nats =
    kind === "mesh"
      ? meshClaims(keys)
      : kind === "nodes"
        ? nodesClaims(keys, revoked)
        : kind === "enrol"
          ? enrolClaims(keys, revoked)
          : systemClaims(keys);
  return issueJwt(
    { name: ACCOUNT_NAMES[kind], sub: accountId(keys, kind), iat, nats },
    keys.operator.privateKey,
    "operator",
  );
}

/** A node account's claims signed by the operator: NODES' (accountJwt), or a shard's. */
export function nodesAccountJwt(
  keys: AccountKeys,
  account: NodesAccount,
  revoked = NO_REVOCATIONS,
  iat?: number,
): string {
  if (account === "NODES") return accountJwt(keys, "nodes", revoked, iat);
  return issueJwt(
    { name: account, sub: nodesAccountId(keys, account), iat, nats: shardClaims(keys, revoked) },
    keys.operator.privateKey,
    "operator",
  );
}

function userJwt(
  name: string,
  user: string,
  account: KeyObject,
  nats: Record<string, unknown>,
  time: { exp?: number; iat?: number } = {},
): string {
  return issueJwt({ name, sub: user, ...time, nats: { type: "user", ...nats } }, account, "account");
}

function grants(p: Permissions): { pub: { allow: string[] }; sub: { allow: string[] } } {
  return { pub: { allow: p.publish.allow }, sub: { allow: p.subscribe.allow } };
}

/** The user nkey (`U…`) of a node's identity public key (standard base64 of its raw 32 bytes), or null. */
export function userOfIdentity(identityB64: string): string | null {
  const raw = rawKeyFromB64(identityB64);
  return raw ? publicNkey("user", raw) : null;
}

/**
 * A node's user: its identity key as the nkey, exactly its grants, answers to one request at a time (plans);
 * `iat` from `issuedAfter` where the user may have been revoked before. A node reading directly is its shard's; one
 * reading from a consumer (enrolled before direct reads) NODES'.
 */
export function nodeUserJwt(
  keys: AccountKeys,
  node: string,
  user: string,
  iat?: number,
  reads: Reads = "direct",
  account: NodesAccount = nodesAccountFor(node, reads),
): string {
  const granted = nodePermissions(node, reads);
  return userJwt(
    nodeUser(node),
    user,
    nodesAccountPair(keys, account).privateKey,
    {
      ...grants(granted),
      ...(granted.allow_responses ? { resp: { max: 1, ttl: 0 } } : {}),
      subs: NODE_MAX_SUBS,
      payload: NODE_MAX_PAYLOAD,
      data: -1,
    },
    { iat },
  );
}

/**
 * An enrolling user of ENROL, for a key made for one code: its grants, the code's expiry as the JWT's, and the
 * code's issued-at (its record keeps it, and its revocation names that second).
 */
export function enrolUserJwt(
  keys: AccountKeys,
  node: string,
  user: string,
  exp: number,
  iat?: number,
): string {
  return userJwt(
    enrolUser(node),
    user,
    keys.enrol.privateKey,
    { ...grants(enrolPermissions(node)), subs: ENROL_MAX_SUBS, payload: ENROL_MAX_PAYLOAD, data: -1 },
    { exp, iat },
  );
}

/** A user of MESH (the controller, an operator's command) or SYS, for a key made for this one connection. */
export function serviceUserJwt(
  keys: AccountKeys,
  kind: "mesh" | "system",
  user: string,
  name: string,
): string {
  return userJwt(name, user, keys[kind].privateKey, { pub: {}, sub: {}, subs: -1, data: -1, payload: -1 });
}
