// Enrolling users as the servers see them: what the resolvers hold of an account (its newest claims, in each
// server's jwt/ directory), who an enrolment code's enrolling user is, an enrolment asked as `enrol` asks, and a
// sign-in with a code's credential (as whoever kept the code).
import { sign } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { ask } from "../../src/link/index.ts";
import { accountIdOf, MeshDir, type Revoking } from "../../src/mesh/index.ts";
import { makeKeyPair, makeOverlayKey, publicKeys } from "../../src/store/index.ts";
import { decodeCode, keyPairOfSeed } from "../../src/vocabulary/index.ts";

const REREADS = 100;
const REREAD_PAUSE_MS = 10;

const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString()) as {
    iat: number;
    sub: string;
    name: string;
    exp?: number;
    nats: { revocations?: Record<string, number>; imports?: { subject: string }[]; exports?: unknown[] };
  };

/** The account's claims as server `server` of the mesh at `dir` keeps them, or null before any was pushed. */
export function heldClaims(dir: string, account: Revoking | "MESH", server = 1) {
  const id = accountIdOf(new MeshDir(dir).accountKeys(), account);
  const file = join(dir, "servers", String(server), "jwt", `${id}.jwt`);
  // the server writes the file in place: one read may catch it empty or half-written, so it is read again
  for (let i = 1; ; i++) {
    if (!existsSync(file)) return null;
    try {
      return claimsOf(readFileSync(file, "utf8").trim());
    } catch (e) {
      if (i >= REREADS) throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, REREAD_PAUSE_MS);
    }
  }
}

/** The revocations the account's claims carry there ({} when none). */
export function heldRevocations(dir: string, account: Revoking, server = 1): Record<string, number> {
  return heldClaims(dir, account, server)?.nats.revocations ?? {};
}

/** The enrolling user a code carries: its key, its JWT's issued-at and expiry, and the account that signed it. */
export function codeUser(code: string): { user: string; iat: number; exp: number; issuer: string } {
  const c = claimsOf(v2(code).jwt) as ReturnType<typeof claimsOf> & { iss: string };
  return { user: c.sub, iat: c.iat, exp: c.exp ?? 0, issuer: c.iss };
}

function v2(code: string) {
  const decoded = decodeCode(code.trim());
  if (!decoded.ok || !("jwt" in decoded.value)) throw new Error("not a v2 enrolment code");
  return decoded.value;
}

/** One node's enrolment, asked as `enrol` asks (fresh keys): "ok", or the answer's words. */
export async function askEnrol(code: string): Promise<string> {
  const c = v2(code);
  const keys = {
    identity: makeKeyPair("ed25519"),
    sealing: makeKeyPair("x25519"),
    overlay: makeOverlayKey(),
  };
  const answer = await ask(
    { servers: c.servers, fingerprint: c.fingerprint, transport: c.transport },
    {
      node: c.node,
      credential: { jwt: c.jwt, seed: c.seed },
      keys: publicKeys(keys),
      sealing: keys.sealing.privateKey,
      facts: { os: "linux", arch: "x64", hostname: c.node, version: "test" },
    },
  );
  return answer.ok ? "ok" : `${c.node}: ${answer.reason}`;
}

/** Sign in with the code's enrolling credential to the mesh at `dir`, as whoever kept the code. */
export async function dialWithCode(dir: string, code: string): Promise<NatsConnection> {
  const { jwt, seed, servers } = v2(code);
  const pair = keyPairOfSeed("user", seed);
  if (!pair) throw new Error("not a user seed");
  const user = codeUser(code).user;
  return await connect({
    servers,
    tls: { ca: new MeshDir(dir).certPem() },
    reconnect: false,
    authenticator: (nonce?: string) => ({
      jwt,
      nkey: user,
      sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
    }),
  });
}
