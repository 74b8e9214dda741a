// Dialling the bus (protocol.md "Transport"): TLS always, the server's certificate accepted only when its
// SHA-256 fingerprint is the pinned one, nothing else checked, and the client's own reconnect off.
//
// How the pin holds before a byte of credentials leaves: nats.js hands its `tls` options to Node's
// tls.connect and sends CONNECT as soon as the handshake completes, with no hook in between; and Node
// calls checkServerIdentity only for a chain that already verified, so a self-signed certificate never
// reaches it. So the first dial to a pin is two connections:
//  1. a preflight that reads the server's INFO, does the TLS handshake accepting anything, takes the
//     certificate it was shown, hangs up without sending a byte of its own, and compares fingerprints;
//  2. the real dial, trusting exactly that certificate as the only CA (so a server that swapped its
//     certificate between the two is refused by the handshake itself), with checkServerIdentity
//     comparing the fingerprint again instead of a host name.
// A pin names one certificate, so once a preflight has shown it every later dial is the second alone (a
// failure other than a refused credential or an absent server is looked at again by a preflight, to say why).
// Either way a server without the pinned certificate sees a TLS handshake and never a CONNECT.
import { createHash, type KeyObject, sign, X509Certificate } from "node:crypto";
import { isIP, connect as netConnect, type Socket } from "node:net";
import { type PeerCertificate, type TLSSocket, connect as tlsConnect } from "node:tls";
import { type Authenticator, connect, errors, type NatsConnection } from "@nats-io/transport-node";
import {
  DIAL_TIMEOUT_MS,
  MAX_INFO_BYTES,
  MAX_PINGS_OUT,
  PING_INTERVAL_MS,
  PREFLIGHT_CLOSE_MS,
} from "../defaults.ts";
import { type Membership, nkeyOf } from "../vocabulary/index.ts";
import { credentialRefusal, isCredentialRefused, reachWords } from "./failures.ts";

export interface DialOptions {
  /** `nats://host:port`, tried in order; the first that passes the pin and takes the credential wins. */
  servers: string[];
  /** SHA-256 of the server's DER certificate, lower-case hex, no colons. */
  fingerprint: string;
  auth: DialAuth;
  /** `_INBOX.node.<n>` or `_INBOX.enrol.<n>`: where this user may subscribe. */
  inboxPrefix: string;
  /** The connection's name as the server's monitoring shows it. */
  name?: string;
  timeoutMs?: number;
}

/**
 * How the node signs in. v2: its user JWT, and the server's nonce signed with the key the JWT names (the node's
 * identity key, or an enrolling key from the code); v1 (a mesh made before): a user and its password.
 */
export type DialAuth =
  | { kind: "jwt"; user: string; jwt: string; key: KeyObject }
  | { kind: "password"; user: string; password: string };

/** The client's sign-in: the nonce signed with the private key, which never leaves this process. */
function authOf(auth: DialAuth): Record<string, unknown> {
  if (auth.kind === "password") return { user: auth.user, pass: auth.password };
  const nkey = nkeyOf("user", auth.key);
  const authenticator: Authenticator = (nonce?: string) => ({
    jwt: auth.jwt,
    nkey,
    sig: sign(null, Buffer.from(nonce ?? ""), auth.key).toString("base64url"),
  });
  return { authenticator };
}

/**
 * A membership's sign-in: v2 with the node's identity key (the store's), refused in words when the key is not
 * there or is not the one the JWT was issued for; v1 with its password.
 */
export function membershipAuth(
  m: Membership,
  identity: KeyObject | undefined,
): DialAuth | { refused: string } {
  if ("password" in m) return { kind: "password", user: m.user, password: m.password };
  if (!identity)
    return {
      refused: "the membership signs in with the node's identity key, and this node has none to sign with",
    };
  const sub = jwtSubject(m.jwt);
  if (sub !== nkeyOf("user", identity))
    return {
      refused: "the membership's user JWT was issued for another identity key than this node's: enrol again",
    };
  return { kind: "jwt", user: m.user, jwt: m.jwt, key: identity };
}

/** The `sub` of a JWT (unverified: the server verifies it), or null. */
function jwtSubject(jwt: string): string | null {
  try {
    const claims = JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8")) as {
      sub?: unknown;
    };
    return typeof claims?.sub === "string" ? claims.sub : null;
  } catch {
    return null;
  }
}

/** Why a dial failed, for the caller deciding what to say and whether to try again. */
export type DialFailure = "unreachable" | "pin" | "auth" | "tls";

export type Dialled =
  | { ok: true; nc: NatsConnection; server: string }
  | { ok: false; kind: DialFailure; reason: string };

type Fetched = { ok: true; der: Buffer } | { ok: false; kind: DialFailure; reason: string };

export function fingerprintOf(der: Uint8Array): string {
  return createHash("sha256").update(der).digest("hex");
}

/** Dial each server in turn; the reason of a failure names every server's and never the password. */
export async function dial(opts: DialOptions): Promise<Dialled> {
  const failures: { kind: DialFailure; reason: string }[] = [];
  for (const server of opts.servers) {
    const one = await dialOne(server, opts);
    if (one.ok) return one;
    failures.push({ kind: one.kind, reason: scrub(one.reason, opts.auth) });
  }
  if (failures.length === 0) return { ok: false, kind: "unreachable", reason: "no server to dial" };
  // the most telling kind wins: a wrong certificate or password is not cured by waiting
  const kind = (["pin", "auth", "tls", "unreachable"] as const).find((k) =>
    failures.some((f) => f.kind === k),
  )!;
  return { ok: false, kind, reason: failures.map((f) => f.reason).join("; ") };
}

/**
 * The certificate each pin names, once a preflight has shown it: a pin is the digest of one certificate, so the
 * preflight can teach nothing more, and a redial (every node at once, after its server restarts) costs one TLS
 * handshake, not two. The real dial still trusts that certificate alone and compares the fingerprint again.
 */
const shownFor = new Map<string, Buffer>();

async function dialOne(server: string, opts: DialOptions): Promise<Dialled> {
  const where = hostPort(server);
  if (!where) return { ok: false, kind: "unreachable", reason: `${server} is not nats://host:port` };
  const timeoutMs = opts.timeoutMs ?? DIAL_TIMEOUT_MS;
  const known = shownFor.get(opts.fingerprint);
  if (known) {
    const { dialled, unreached } = await pinnedDial(server, opts, known, timeoutMs);
    if (dialled.ok || dialled.kind === "auth" || unreached) return dialled;
    // the handshake or the greeting failed: a preflight says whether the server now shows another certificate
    // or no TLS at all; showing the pinned one still, the dial's own failure stands
    const seen = await pinShown(server, where, opts.fingerprint, timeoutMs);
    return seen.ok ? dialled : seen;
  }
  const seen = await pinShown(server, where, opts.fingerprint, timeoutMs);
  if (!seen.ok) return seen;
  shownFor.set(opts.fingerprint, seen.der);
  return (await pinnedDial(server, opts, seen.der, timeoutMs)).dialled;
}

/** The preflight: the certificate the server shows, when it is the pinned one. */
async function pinShown(
  server: string,
  where: { host: string; port: number },
  pin: string,
  timeoutMs: number,
): Promise<Fetched> {
  const seen = await peerCertificate(where.host, where.port, timeoutMs);
  if (!seen.ok) return { ok: false, kind: seen.kind, reason: `${server}: ${seen.reason}` };
  const got = fingerprintOf(seen.der);
  return got === pin ? seen : { ok: false, kind: "pin", reason: mismatch(server, got, pin) };
}

/**
 * The dial itself, trusting `der` alone; `unreached` when no server answered at all, which a preflight could not
 * explain better.
 */
async function pinnedDial(
  server: string,
  opts: DialOptions,
  der: Buffer,
  timeoutMs: number,
): Promise<{ dialled: Dialled; unreached: boolean }> {
  const expired = expiry(der);
  if (expired)
    return { dialled: { ok: false, kind: "tls", reason: `${server}: ${expired}` }, unreached: false };
  try {
    const nc = await connect({
      servers: [server],
      ...authOf(opts.auth),
      name: opts.name,
      inboxPrefix: opts.inboxPrefix,
      reconnect: false, // reconnection is the caller's (the run loop's backoff with jitter)
      timeout: timeoutMs,
      pingInterval: PING_INTERVAL_MS,
      maxPingOut: MAX_PINGS_OUT,
      ignoreClusterUpdates: true,
      noRandomize: true,
      tls: pinnedTls(der, opts.fingerprint, server),
    });
    return { dialled: { ok: true, nc, server }, unreached: false };
  } catch (e) {
    return { dialled: failureOf(e, server, opts.auth.user), unreached: isUnreached(e) };
  }
}

/** The server was not there or did not answer: a refused connection, a cut route, a dial that timed out. */
function isUnreached(e: unknown): boolean {
  const err = e as Error & { code?: string; cause?: { code?: string } };
  if (err instanceof errors.TimeoutError) return true;
  const code = err.code ?? err.cause?.code ?? "";
  return /^(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EPIPE)$/.test(
    code,
  );
}

/** Node's tls.connect options: only this certificate is trusted, and its fingerprint is the identity. */
function pinnedTls(der: Buffer, pin: string, server: string): Record<string, unknown> {
  return {
    ca: pemOf(der),
    // a pinned certificate issued by a CA is its own trust anchor here; no chain above it is wanted
    allowPartialTrustChain: true,
    checkServerIdentity: (_host: string, cert: PeerCertificate) => {
      const got = cert.raw ? fingerprintOf(cert.raw) : "none";
      return got === pin ? undefined : new Error(mismatch(server, got, pin));
    },
  };
}

function mismatch(server: string, got: string, pin: string): string {
  return `${server} presented a certificate with fingerprint ${got}, not the pinned ${pin}: refused before any credentials were sent`;
}

// OpenSSL checks a trust anchor's dates and Node gives no way to skip that, so an expired pinned
// certificate is said plainly here rather than as a handshake error.
function expiry(der: Buffer): string | null {
  try {
    const cert = new X509Certificate(der);
    const now = Date.now();
    if (Date.parse(cert.validTo) < now)
      return `the pinned certificate expired on ${cert.validTo}: the mesh must renew it`;
    if (Date.parse(cert.validFrom) > now)
      return `the pinned certificate is not valid until ${cert.validFrom}: is this machine's clock right?`;
    return null;
  } catch {
    return "the server's certificate cannot be read";
  }
}

/**
 * The preflight: TCP, the server's INFO line, a TLS handshake that accepts any certificate, the
 * certificate taken, the socket destroyed. Nothing but the handshake is ever written.
 */
export function peerCertificate(host: string, port: number, timeoutMs: number): Promise<Fetched> {
  const server = `${host}:${port}`;
  return new Promise((resolve) => {
    let settled = false;
    let tlsSocket: TLSSocket | null = null;
    const socket: Socket = netConnect({ host, port });
    const finish = (result: Fetched) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (result.ok && tlsSocket) hangUp(tlsSocket, socket);
      else {
        tlsSocket?.destroy();
        socket.destroy();
      }
      resolve(result);
    };
    const timer = setTimeout(
      () =>
        finish({
          ok: false,
          kind: "unreachable",
          reason: `no TLS handshake with ${server} in ${timeoutMs} ms`,
        }),
      timeoutMs,
    );
    socket.setNoDelay(true);
    socket.on("error", (e: NodeJS.ErrnoException) =>
      finish({ ok: false, kind: "unreachable", reason: `cannot reach ${server}: ${reachWords(e)}` }),
    );
    socket.on("close", () =>
      finish({
        ok: false,
        kind: "unreachable",
        reason: `${server} closed the connection before showing a certificate`,
      }),
    );
    readInfo(socket, server, finish, () => {
      tlsSocket = handshake(socket, host, server, finish);
    });
  });
}

/**
 * A completed handshake is closed as TLS closes (close_notify, after the client's last handshake flight is
 * flushed): destroyed at once, the server saw the handshake cut short and logged `TLS handshake error: EOF` at
 * every dial, an error to the operator reading it. Destroyed anyway if the server does not close in time.
 */
function hangUp(tlsSocket: TLSSocket, socket: Socket): void {
  tlsSocket.on("error", () => undefined);
  socket.on("error", () => undefined);
  const cut = setTimeout(() => {
    tlsSocket.destroy();
    socket.destroy();
  }, PREFLIGHT_CLOSE_MS);
  cut.unref();
  tlsSocket.once("close", () => {
    clearTimeout(cut);
    socket.destroy();
  });
  tlsSocket.end();
}

/** The server's INFO line, read before any TLS: a server that is no NATS server, or not one requiring TLS, is refused. */
function readInfo(socket: Socket, server: string, finish: (r: Fetched) => void, then: () => void): void {
  let buffered = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    const eol = buffered.indexOf("\r\n");
    if (eol < 0) {
      if (buffered.length > MAX_INFO_BYTES)
        finish({ ok: false, kind: "tls", reason: `${server} is not a NATS server` });
      return;
    }
    socket.off("data", onData);
    const problem = infoProblem(buffered.subarray(0, eol).toString("utf8"));
    if (problem) return finish({ ok: false, kind: "tls", reason: `${server} ${problem}` });
    then();
  };
  socket.on("data", onData);
}

/** The TLS handshake over the socket, accepting any certificate: the one shown is taken, to be compared with the pin. */
function handshake(socket: Socket, host: string, server: string, finish: (r: Fetched) => void): TLSSocket {
  const upgraded = tlsConnect({
    socket,
    rejectUnauthorized: false,
    servername: isIP(host) ? undefined : host,
  });
  upgraded.on("error", (e: NodeJS.ErrnoException) =>
    finish({ ok: false, kind: "tls", reason: `TLS with ${server} failed: ${reachWords(e)}` }),
  );
  upgraded.once("secureConnect", () => {
    const cert = upgraded.getPeerCertificate(true);
    if (!cert?.raw) return finish({ ok: false, kind: "tls", reason: `${server} presented no certificate` });
    finish({ ok: true, der: Buffer.from(cert.raw) });
  });
  return upgraded;
}

function infoProblem(line: string): string | null {
  if (!line.startsWith("INFO ")) return "did not greet as a NATS server";
  let info: unknown;
  try {
    info = JSON.parse(line.slice(5));
  } catch {
    return "sent an INFO that is not JSON";
  }
  if ((info as { tls_required?: unknown })?.tls_required !== true)
    return "does not require TLS: a node speaks to its mesh only over TLS";
  return null;
}

function failureOf(e: unknown, server: string, user: string): Dialled {
  const err = e as Error & { code?: string; cause?: { code?: string; message?: string } };
  if (isCredentialRefused(err)) return { ok: false, kind: "auth", reason: credentialRefusal(server, user) };
  const code = err.code ?? err.cause?.code;
  const message = err.message || err.cause?.message || String(e);
  if (message.includes("not the pinned") || (code && /CERT|SIGNATURE|ISSUER|ALTNAME/.test(code)))
    return {
      ok: false,
      kind: "pin",
      reason: `${server}: the certificate changed between the check and the dial (${message})`,
    };
  if (err instanceof errors.TimeoutError)
    return { ok: false, kind: "unreachable", reason: `${server} did not answer in time` };
  return {
    ok: false,
    kind: "unreachable",
    reason: `${server}: ${code ? reachWords(err.code ? err : err.cause) : message}`,
  };
}

export function hostPort(server: string): { host: string; port: number } | null {
  const m = /^(?:nats|tls):\/\/(\[[^\]]+\]|[^\s/:]+):([0-9]{1,5})$/.exec(server);
  if (!m) return null;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1]!.replace(/^\[(.*)\]$/, "$1"), port };
}

function pemOf(der: Buffer): string {
  const b64 = der.toString("base64").replace(/(.{64})/g, "$1\n");
  return `-----BEGIN CERTIFICATE-----\n${b64.trimEnd()}\n-----END CERTIFICATE-----\n`;
}

// No reason this file composes quotes the password, and a library's message should not either; if one
// ever did, it is cut out here rather than trusted. A JWT is no secret, and the key never becomes text here.
function scrub(reason: string, auth: DialAuth): string {
  return auth.kind === "password" && auth.password ? reason.replaceAll(auth.password, "<password>") : reason;
}
