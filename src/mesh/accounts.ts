// The bus's accounts (protocol.md "Accounts"): an operator signs three account JWTs, and every user is a JWT
// signed by its account's key — no password anywhere.
//   SYS    the servers' system account: the mesh pushes an account's new claims (a revocation) through it.
//   MESH   JetStream (the streams, the key-value buckets, the object store) and the controller's users.
//   NODES  every node's user; JetStream off. What a node may do crosses by the exports below, as services: the
//          server gives a service request a reply address of its own making, so no reply a node picks ever
//          reaches MESH's JetStream API (docs/security.md says what was tried).
//   ENROL  every enrolling user (the short-lived user an enrolment code carries); JetStream off; it imports the
//          enrolment service and its answers, nothing else. Apart from NODES so that NODES' claims carry only
//          nodes' revocations: their size grows with nodes removed, never with nodes enrolled. ENROL's own stay
//          bounded by a revocation of every user issued up to a second (`"*"`, enrolRevoked below).
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
import { claimsOf, issueJwt } from "./jwt.ts";
import { enrolPermissions, nodePermissions, type Permissions, type Reads } from "./permissions.ts";

export const ACCOUNT_NAMES = { system: "SYS", mesh: "MESH", nodes: "NODES", enrol: "ENROL" } as const;
export type AccountKind = keyof typeof ACCOUNT_NAMES;

/** The two kinds of export and import (a service carries a reply; a stream does not). */
const KIND = { service: "service", stream: "stream" } as const;

/** What nodes publish, exported by MESH as services and imported by NODES. */
export const NODE_SERVICES: readonly { subject: string; stream?: true }[] = [
  { subject: "mesh.report.*" },
  { subject: "mesh.heartbeat.*" },
  { subject: "mesh.rekey.*" },
  { subject: "$JS.API.CONSUMER.INFO.DECLARE.*" },
  // a pull is answered by many messages (its deliveries, the server's idle heartbeats) over the pull's life
  { subject: "$JS.API.CONSUMER.MSG.NEXT.DECLARE.*", stream: true },
  { subject: "$JS.ACK.DECLARE.>" },
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
/** Each declaration's core copy, a direct-reading node's wake-up: published in MESH, delivered in NODES (a stream). */
export const DECLARE_WAKE = "mesh.declare.*";
/** Plans: MESH asks a node on its own subject; NODES exports it as a service, MESH imports it. */
export const PLAN_SERVICE = "mesh.plan.*";

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
const enrolImports = (mesh: string) => [
  serviceImport(ENROL_SERVICE, mesh),
  { name: ENROL_ANSWERS, subject: ENROL_ANSWERS, account: mesh, type: KIND.stream },
];

function meshClaims(keys: AccountKeys): Record<string, unknown> {
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
    ],
    imports: [serviceImport(PLAN_SERVICE, accountId(keys, "nodes"))],
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
      { name: DECLARE_WAKE, subject: DECLARE_WAKE, account: mesh, type: KIND.stream },
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

/** The users NODES no longer admits: each user key with the time before which its JWTs are void. */
export interface Revocations {
  users: Record<string, number>;
  /** Those of them that were enrolling users: dropped from the list once their JWT has expired anyway. */
  enrolling: string[];
}

export const NO_REVOCATIONS: Revocations = { users: {}, enrolling: [] };

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
          : { type: "account", limits: UNLIMITED };
  return issueJwt(
    { name: ACCOUNT_NAMES[kind], sub: accountId(keys, kind), iat, nats },
    keys.operator.privateKey,
    "operator",
  );
}

/** The revocations a NODES account JWT carries (the one the servers hold), for the next to keep. */
export function revocationsOf(jwt: string): Revocations {
  const nats = (claimsOf(jwt)?.nats ?? {}) as { revocations?: unknown; tags?: unknown };
  const users: Record<string, number> = {};
  if (nats.revocations && typeof nats.revocations === "object")
    for (const [k, v] of Object.entries(nats.revocations)) if (typeof v === "number") users[k] = v;
  const tags = Array.isArray(nats.tags) ? nats.tags.filter((t): t is string => typeof t === "string") : [];
  const enrolling = tags
    .filter((t) => t.startsWith("enrolling:"))
    .map((t) => t.slice("enrolling:".length).toUpperCase());
  return { users, enrolling };
}

/**
 * `revoked` with `add` cut off from `at` (unix seconds), less each enrolling user whose JWT has expired: an
 * enrolling user is revoked until its own expiry (`at` = that expiry), after which the server refuses it anyway.
 */
export function withRevoked(
  revoked: Revocations,
  add: { user: string; at: number; enrolling: boolean }[],
  now = Math.floor(Date.now() / 1000),
): Revocations {
  const users = { ...revoked.users };
  const enrolling = new Set(revoked.enrolling);
  for (const a of add) {
    const earlier = users[a.user];
    // a user revoked before and admitted again holds a JWT issued after that revocation (`issuedAfter`), maybe
    // within its second: revoked again, a second later at least, so that JWT is void too
    users[a.user] = earlier === undefined ? a.at : Math.max(earlier + (a.enrolling ? 0 : 1), a.at);
    if (a.enrolling) enrolling.add(a.user);
  }
  for (const k of [...enrolling])
    if ((users[k] ?? 0) < now) {
      delete users[k];
      enrolling.delete(k);
    }
  return { users, enrolling: [...enrolling] };
}

/** The key of ENROL's revocation of every user issued at or before its second (nats-io/jwt's `All`). */
export const ALL_USERS = "*";

/** The user's JWT issued at `iat` is void under `revoked` (its own entry, or the one for every user). */
export function cutOff(revoked: Record<string, number>, user: string, iat: number): boolean {
  return Math.max(revoked[user] ?? 0, revoked[ALL_USERS] ?? 0) >= iat;
}

/**
 * ENROL's revocations with `add` cut off (each at its JWT's issued-at: an enrolling user's key is made for one
 * code, so that one second voids its only JWT), bounded: every user issued at or before the floor is revoked by
 * one entry (`"*"`, never moved back), and each entry it covers is dropped. `floor` says that second from the
 * revocations (nodes.ts enrolFloor: the second before the oldest code whose user must still sign in); null keeps
 * the one held.
 */
export function enrolRevoked(
  revoked: Revocations,
  add: { user: string; at: number }[],
  floor: ((users: Record<string, number>) => number) | null,
): Revocations {
  const users = { ...revoked.users };
  for (const a of add) users[a.user] = Math.max(users[a.user] ?? a.at, a.at);
  const all = Math.max(users[ALL_USERS] ?? 0, floor?.(users) ?? 0);
  if (all <= 0) return { users, enrolling: [] };
  for (const [k, at] of Object.entries(users)) if (at <= all) delete users[k];
  return { users: { [ALL_USERS]: all, ...users }, enrolling: [] };
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

/**
 * The issued-at a new JWT for `user` must carry: now, or the second after the servers' revocation of that user when
 * that is not yet past. A revocation voids every JWT of the user issued at or before its second (nats-server
 * compares whole seconds), so a user revoked and admitted again within one second (`node reissue` then an
 * enrolment with the same identity key, `node rm` + `node add` likewise) would be refused with its new JWT.
 */
export function issuedAfter(revoked: Revocations, user: string, now = Math.floor(Date.now() / 1000)): number {
  const at = revoked.users[user];
  return at === undefined ? now : Math.max(now, at + 1);
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
 * `iat` from `issuedAfter` where the user may have been revoked before.
 */
export function nodeUserJwt(
  keys: AccountKeys,
  node: string,
  user: string,
  iat?: number,
  reads: Reads = "direct",
): string {
  const granted = nodePermissions(node, reads);
  return userJwt(
    nodeUser(node),
    user,
    keys.nodes.privateKey,
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
