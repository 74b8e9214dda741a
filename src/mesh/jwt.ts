// NATS JWTs (nats-io/jwt v2, what nats-server 2.9 decodes): `base64url(header).base64url(claims).base64url(sig)`,
// the header `{"typ":"JWT","alg":"ed25519-nkey"}`, the signature Ed25519 by the issuer's key over the first two
// parts, `jti` the base32 of SHA-512/256 of the claims without it. The operator signs the accounts; an account
// signs its users. Nothing here holds a key longer than a call.
import { createHash, type KeyObject, sign } from "node:crypto";
import { base32, type NkeyRole, nkeyOf } from "../vocabulary/index.ts";

const HEADER = Buffer.from(JSON.stringify({ typ: "JWT", alg: "ed25519-nkey" })).toString("base64url");

export interface Claims {
  name: string;
  /** The subject's public nkey: the account's or the user's. */
  sub: string;
  /** Seconds since the epoch; absent: no expiry. */
  exp?: number;
  /** Seconds since the epoch it counts as issued at (revocations compare it); absent: now. */
  iat?: number;
  nats: Record<string, unknown>;
}

/** The JWT of `claims`, issued by `issuer` (an operator's or an account's private key), now unless `claims.iat`. */
export function issueJwt(claims: Claims, issuer: KeyObject, issuerRole: NkeyRole): string {
  const body: Record<string, unknown> = {
    iat: claims.iat ?? Math.floor(Date.now() / 1000),
    iss: nkeyOf(issuerRole, issuer),
    name: claims.name,
    sub: claims.sub,
    ...(claims.exp ? { exp: claims.exp } : {}),
    nats: { ...claims.nats, version: 2 },
  };
  body.jti = base32(createHash("sha512-256").update(JSON.stringify(body)).digest());
  const payload = Buffer.from(JSON.stringify(body)).toString("base64url");
  const sig = sign(null, Buffer.from(`${HEADER}.${payload}`), issuer).toString("base64url");
  return `${HEADER}.${payload}.${sig}`;
}

/** The claims of a JWT, unverified (the servers verify; the mesh reads only what it issued itself), or null. */
export function claimsOf(jwt: string): Record<string, unknown> | null {
  const payload = jwt.split(".")[1];
  if (!payload) return null;
  try {
    const json: unknown = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
    return json && typeof json === "object" && !Array.isArray(json)
      ? (json as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}
