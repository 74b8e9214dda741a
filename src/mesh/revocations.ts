// Revocations as the accounts' claims carry them (protocol.md "Revocation"): a user key with the second up to which
// every JWT of it is void, nats-server comparing whole seconds. Pure: claims.ts reads and pushes them.
import { claimsOf } from "./jwt.ts";

/** The users an account no longer admits: each user key with the time before which its JWTs are void. */
export interface Revocations {
  users: Record<string, number>;
  /** Those of them that were enrolling users: dropped from the list once their JWT has expired anyway. */
  enrolling: string[];
}

export const NO_REVOCATIONS: Revocations = { users: {}, enrolling: [] };

/** The revocations an account JWT carries (the one the servers hold), for the next to keep. */
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
