// Signing in to the mesh's own bus, and changing an account on it while it runs. A command of the mesh signs in as
// a user it mints for the one connection (a fresh key, a JWT signed by the account's key from accounts.json): no
// password is kept anywhere. A revocation is a node account's (a node's user: its shard, or NODES) or ENROL's (an
// enrolling user) claims signed
// again with the user added, pushed over the system account (`$SYS.REQ.CLAIMS.UPDATE`): each server takes it at
// once, cuts that user's live connections, and keeps it in its resolver directory; nothing rewritten or reloaded.
import { generateKeyPairSync, sign } from "node:crypto";
import { type Authenticator, connect, type NatsConnection } from "@nats-io/transport-node";
import {
  CLAIMS_UPDATE_MS,
  KV_CAS_TRIES,
  MESH_CONNECT_TIMEOUT_MS,
  NODES_MAX_SUBS,
  PLAN_LISTENING_MS,
} from "../defaults.ts";
import { nkeyOf } from "../vocabulary/index.ts";
import { type AccountKeys, accountId, accountJwt, nodesAccountJwt, serviceUserJwt } from "./accounts.ts";
import { claimsOf } from "./jwt.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";
import {
  cutOff,
  enrolRevoked,
  NO_REVOCATIONS,
  type Revocations,
  revocationsOf,
  withRevoked,
} from "./revocations.ts";
import { type NodesAccount, nodesAccountId, SHARDS } from "./shards.ts";

/** Sign in as a new user of MESH or SYS: its key made now, lives as long as this process, never written. */
export function serviceAuthenticator(
  keys: AccountKeys,
  kind: "mesh" | "system",
  name: string,
): Authenticator {
  const pair = generateKeyPairSync("ed25519");
  const user = nkeyOf("user", pair.publicKey);
  const jwt = serviceUserJwt(keys, kind, user, name);
  return (nonce?: string) => ({
    jwt,
    nkey: user,
    sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
  });
}

const dec = new TextDecoder();

/** The accounts whose claims carry revocations, by name. */
export type Revoking = "ENROL" | NodesAccount;

/** An account's public key, by the name the servers show (ENROL, MESH, SYS, NODES or a shard). */
export function accountIdOf(keys: AccountKeys, account: Revoking | "MESH" | "SYS"): string {
  if (account === "ENROL") return accountId(keys, "enrol");
  if (account === "MESH") return accountId(keys, "mesh");
  if (account === "SYS") return accountId(keys, "system");
  return nodesAccountId(keys, account);
}

function jwtOf(keys: AccountKeys, account: Revoking, revoked: Revocations): string {
  return account === "ENROL" ? accountJwt(keys, "enrol", revoked) : nodesAccountJwt(keys, account, revoked);
}

/** An account's claims the servers hold now (the newest, revocations and all); `init`'s when they hold none. */
export async function currentRevocations(
  sys: NatsConnection,
  keys: AccountKeys,
  account: Revoking,
): Promise<Revocations> {
  const held = await heldClaims(sys, keys, account);
  return held ? revocationsOf(held) : NO_REVOCATIONS;
}

/** Push an account's claims to the servers; throws with the server's own words when it refuses them. */
export async function pushClaims(sys: NatsConnection, jwt: string, name: string): Promise<void> {
  const m = await sys.request("$SYS.REQ.CLAIMS.UPDATE", jwt, { timeout: CLAIMS_UPDATE_MS });
  const answer = JSON.parse(dec.decode(m.data)) as { error?: { description?: string } };
  if (answer.error) throw new Error(`the servers refused the ${name} claims: ${answer.error.description}`);
}

export interface Revoke {
  /** A user nkey (`U…`). */
  user: string;
  /**
   * Unix seconds: every JWT of that user issued at or before it is void. An enrolling user of ENROL: its JWT's
   * issued-at; one of NODES (a code issued before ENROL existed): its expiry.
   */
  at: number;
  /** An enrolling user: dropped from the list once its own JWT has expired (NODES) or is covered by `"*"` (ENROL). */
  enrolling: boolean;
  /** The account whose user it is: ENROL, or a node's (its record's shard, or NODES). */
  account: Revoking;
}

/** ENROL's floor, from the revocations it is to be pushed with (nodes.ts enrolFloor). */
export type EnrolFloor = (revoked: Record<string, number>) => number;

/** A change to one account's revocations: the next from those held, and whether those held already have it. */
interface Change {
  account: Revoking;
  next(held: Revocations): Revocations;
  kept(held: Revocations): boolean;
}

/** Push `change` on every server now, keeping every earlier revocation (read back from the servers). */
async function changeRevocations(sys: NatsConnection, keys: AccountKeys, change: Change): Promise<void> {
  for (let i = 1; ; i++) {
    const held = await currentRevocations(sys, keys, change.account);
    const next = change.next(held);
    // nothing to change (a prune with nothing to drop): no claims pushed
    if (JSON.stringify(next.users) === JSON.stringify(held.users) && change.kept(held)) return;
    await pushClaims(sys, jwtOf(keys, change.account, next), change.account);
    // two consoles (or controllers) revoking at once each push what they read: read back, and push again when
    // another's claims took this one's place
    if (change.kept(await currentRevocations(sys, keys, change.account))) return;
    if (i >= KV_CAS_TRIES)
      throw new Error(
        "the servers did not keep the revocation (another console's claims took its place): try again",
      );
  }
}

/**
 * Revoke users of the node accounts and ENROL on every server now, one push an account; `floor` (or null) raises
 * ENROL's revocation of every user issued at or before the second it says from the revocations held
 * (accounts.ts enrolRevoked).
 */
export async function revokeUsers(
  sys: NatsConnection,
  keys: AccountKeys,
  revoke: Revoke[],
  floor: EnrolFloor | null = null,
): Promise<void> {
  const enrol = revoke.filter((r) => r.account === "ENROL");
  for (const account of new Set(revoke.map((r) => r.account).filter((a) => a !== "ENROL"))) {
    const users = revoke.filter((r) => r.account === account);
    await changeRevocations(sys, keys, {
      account,
      next: (held) => withRevoked(held, users),
      kept: (held) => kept(held, users),
    });
  }
  if (enrol.length || floor !== null)
    await changeRevocations(sys, keys, {
      account: "ENROL",
      next: (held) => enrolRevoked(held, enrol, floor),
      kept: (held) => enrol.every((r) => cutOff(held.users, r.user, r.at)),
    });
}

/** Every revocation asked for is held (an enrolling user's whose JWT expired since need not be). */
function kept(held: Revocations, revoke: Revoke[], now = Math.floor(Date.now() / 1000)): boolean {
  return revoke.every((r) => (r.enrolling && r.at < now) || (held.users[r.user] ?? 0) >= r.at);
}

/**
 * The nodes among `nodes` with a subscription on their plan subject in their account now, on any server (each
 * answers for its own clients), asked over the system account, every account at once; null when that cannot be
 * asked (then every node is asked).
 */
export async function listeningNodes(
  mesh: MeshDir,
  nodes: { node: string; account: NodesAccount }[],
): Promise<Set<string> | null> {
  let sys: NatsConnection | null = null;
  try {
    const keys = mesh.accountKeys();
    sys = await connect({
      servers: mesh.urls(),
      authenticator: serviceAuthenticator(keys, "system", "mesh-host mesh (system)"),
      tls: { ca: mesh.certPem() },
      timeout: MESH_CONNECT_TIMEOUT_MS,
      reconnect: false,
    });
    const heard = new Set<string>();
    const options = JSON.stringify({ subscriptions: true, limit: NODES_MAX_SUBS });
    const ask = async (account: NodesAccount): Promise<void> => {
      const answers = await sys!.requestMany(
        `$SYS.REQ.ACCOUNT.${accountIdOf(keys, account)}.SUBSZ`,
        options,
        {
          strategy: "timer",
          maxWait: PLAN_LISTENING_MS,
        },
      );
      for await (const m of answers) {
        const list = (
          JSON.parse(dec.decode(m.data)) as { data?: { subscriptions_list?: { subject: string }[] } }
        ).data?.subscriptions_list;
        for (const s of list ?? [])
          if (s.subject.startsWith("mesh.plan."))
            heard.add(`${account} ${s.subject.slice("mesh.plan.".length)}`);
      }
    };
    await Promise.all([...new Set(nodes.map((n) => n.account))].map(ask));
    return new Set(nodes.filter((n) => heard.has(`${n.account} ${n.node}`)).map((n) => n.node));
  } catch {
    return null;
  } finally {
    await sys?.close().catch(() => undefined);
  }
}

/** A connection to the mesh's running bus as a new user of SYS; a bus that does not answer is refused, saying `why`. */
async function systemConnection(mesh: MeshDir, keys: AccountKeys, why: string): Promise<NatsConnection> {
  try {
    return await connect({
      servers: mesh.urls(),
      authenticator: serviceAuthenticator(keys, "system", "mesh-host mesh (system)"),
      name: "mesh-host mesh (system)",
      tls: { ca: mesh.certPem() },
      timeout: MESH_CONNECT_TIMEOUT_MS,
      reconnect: false,
    });
  } catch (e) {
    throw new MeshRefused(
      `the mesh's bus does not answer at ${mesh.urls().join(", ")}, so ${why} (is \`mesh-host mesh up\` running?): ${String((e as Error).message).split("\n")[0]}`,
    );
  }
}

/** Revoke on the mesh's running bus, as a user of SYS for this one call; a bus that does not answer is refused. */
export async function revokeOnBus(
  mesh: MeshDir,
  revoke: Revoke[],
  floor: EnrolFloor | null = null,
): Promise<void> {
  const keys = mesh.accountKeys();
  const sys = await systemConnection(mesh, keys, "nothing could be revoked");
  try {
    await revokeUsers(sys, keys, revoke, floor);
  } finally {
    await sys.close().catch(() => undefined);
  }
}

/** An account's revocations the servers hold now, asked over SYS: what a user admitted again is issued after. */
export async function revocationsOnBus(mesh: MeshDir, account: Revoking): Promise<Revocations> {
  const keys = mesh.accountKeys();
  const sys = await systemConnection(mesh, keys, "its revocations could not be read");
  try {
    return await currentRevocations(sys, keys, account);
  } finally {
    await sys.close().catch(() => undefined);
  }
}

/** What of an account's claims a release changes (its bounds, exports, imports), as comparable text. */
function shapeOf(claims: Record<string, unknown> | null): string {
  const nats = (claims?.nats ?? {}) as Record<string, unknown>;
  return JSON.stringify([nats.limits, nats.exports, nats.imports]);
}

/**
 * The accounts' claims as this release makes them, pushed when the servers hold others: a mesh raised by an
 * earlier release has neither the exports nor the imports of direct reads and the shards (protocol.md), and its
 * servers preload claims only where their resolver holds none newer (so a shard new to them has this release's).
 * The shards first, then MESH which imports from them, then SYS which imports from MESH, then NODES. Revocations
 * are kept; an account whose claims cannot be read is left alone (pushed blind, it would forget its revocations).
 * The accounts pushed, by name.
 */
export async function claimsBroughtUp(mesh: MeshDir): Promise<string[]> {
  const keys = mesh.accountKeys();
  const sys = await systemConnection(
    mesh,
    keys,
    "the accounts' claims could not be brought up to this release",
  );
  const pushed: string[] = [];
  try {
    const accounts: [Revoking | "MESH" | "SYS", (revoked: Revocations) => string][] = [
      ...SHARDS.map((s): [NodesAccount, (r: Revocations) => string] => [
        s,
        (r) => nodesAccountJwt(keys, s, r),
      ]),
      ["MESH", () => accountJwt(keys, "mesh")],
      ["SYS", () => accountJwt(keys, "system")],
      ["NODES", (r) => nodesAccountJwt(keys, "NODES", r)],
    ];
    // one after another: 131 lookups asked at once can outlast their timeout on a busy server, and an account
    // whose claims were not read is left alone, unbrought
    for (const [account, jwtWith] of accounts) {
      const held = await heldClaims(sys, keys, account);
      if (!held) continue;
      const next = jwtWith(revocationsOf(held));
      if (shapeOf(claimsOf(held)) === shapeOf(claimsOf(next))) continue;
      await pushClaims(sys, next, account);
      pushed.push(account);
    }
    return pushed;
  } finally {
    await sys.close().catch(() => undefined);
  }
}

/** The account's JWT the servers hold now, or null when none answers with one. */
async function heldClaims(
  sys: NatsConnection,
  keys: AccountKeys,
  account: Revoking | "MESH" | "SYS",
): Promise<string | null> {
  const id = accountIdOf(keys, account);
  try {
    const m = await sys.request(`$SYS.REQ.ACCOUNT.${id}.CLAIMS.LOOKUP`, "", { timeout: CLAIMS_UPDATE_MS });
    const text = dec.decode(m.data);
    return text.startsWith("ey") ? text : null;
  } catch {
    return null;
  }
}
