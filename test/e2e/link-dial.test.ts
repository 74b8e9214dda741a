// The pin (protocol.md "Transport"): a server presenting any certificate but the pinned one is refused
// before a byte of credentials is sent. Proved against a listener that speaks just enough NATS to be
// dialled (an INFO asking for TLS, then TLS with another certificate) and records every byte it is sent
// — with a control showing that, given its own fingerprint, the same listener does receive CONNECT.
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dial, openLink } from "../../src/link/index.ts";
import { Membership } from "../../src/vocabulary/index.ts";

/** An identity key for a link that only dials: nothing it signs is read here. */
const anyKey = () => generateKeyPairSync("ed25519").privateKey;

import { EVENT_WAIT_MS, freePort, type MadeCert, MeshDouble, makeCert, waitFor } from "../mesh/index.ts";

interface Impostor {
  url: string;
  server: Server;
  /** Every byte the client sent inside TLS, and before it. */
  plaintext: Buffer[];
  raw: Buffer[];
  /** Every connection it was dialled on has closed, and what arrived on it is recorded. */
  done(): boolean;
  /** Close every connection it holds (the listener stays). */
  hangUp(): void;
  /** How many connections it has been dialled on. */
  connections(): number;
}

// The outer listener greets as NATS and relays the client's bytes, recorded, to an inner TLS server holding
// the impostor's certificate, which records what arrives inside TLS.
async function impostor(cert: MadeCert): Promise<Impostor> {
  const plaintext: Buffer[] = [];
  const raw: Buffer[] = [];
  const open = new Set<{ destroy(): void }>();
  let dialled = 0;
  const inner = createTlsServer({ cert: cert.certPem, key: cert.keyPem }, (tls) => {
    open.add(tls);
    tls.on("data", (d: Buffer) => plaintext.push(d));
    tls.on("error", () => undefined);
    tls.on("close", () => open.delete(tls));
  });
  inner.on("tlsClientError", () => undefined);
  await new Promise<void>((resolve) => inner.listen(0, "127.0.0.1", resolve));
  const innerPort = portOf(inner);
  const server = createServer((client) => {
    dialled++;
    open.add(client);
    client.on("error", () => undefined);
    const info = {
      server_id: "IMPOSTOR",
      version: "2.9.10",
      proto: 1,
      tls_required: true,
      auth_required: true,
      max_payload: 1048576,
    };
    client.write(`INFO ${JSON.stringify(info)}\r\n`);
    const upstream = connect(innerPort, "127.0.0.1");
    upstream.on("error", () => client.destroy());
    client.on("data", (d: Buffer) => {
      raw.push(d);
      upstream.write(d);
    });
    upstream.pipe(client);
    open.add(upstream);
    upstream.on("close", () => open.delete(upstream));
    client.on("close", () => {
      open.delete(client);
      // what the client sent reaches the inner server before it hears the end; what the inner server still says
      // (its closing of TLS, a client that hung up politely) is read and dropped, or its end is never seen
      upstream.unpipe(client);
      upstream.resume();
      upstream.end();
    });
  });
  server.on("close", () => inner.close());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `nats://127.0.0.1:${portOf(server)}`,
    server,
    plaintext,
    raw,
    done: () => dialled > 0 && open.size === 0,
    hangUp: () => {
      for (const socket of open) socket.destroy();
    },
    connections: () => dialled,
  };
}

function portOf(server: Server): number {
  const address = server.address();
  return typeof address === "object" && address ? address.port : 0;
}

describe("dialling with a pinned certificate", () => {
  let mesh: MeshDouble;
  let dir: string;
  let other: MadeCert;

  beforeAll(async () => {
    mesh = await MeshDouble.start();
    dir = mkdtempSync(join(tmpdir(), "link-dial-"));
    other = makeCert(dir, "impostor", "impostor");
  });

  afterAll(async () => {
    await mesh?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A dial pinned to the mesh's certificate, of a listener showing another: refused as "pin", both fingerprints
   * said, and not a byte of protocol (no CONNECT, no password) sent, only a TLS handshake.
   */
  async function refusedBeforeConnect(timeoutMs?: number): Promise<void> {
    const fake = await impostor(other);
    try {
      const result = await dial({
        servers: [fake.url],
        fingerprint: mesh.fingerprint,
        auth: { kind: "password", user: "node.alpha", password: "the-password-123" },
        inboxPrefix: "_INBOX.node.alpha",
        timeoutMs,
      });
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(result.kind).toBe("pin");
      expect(result.reason).toContain(other.fingerprint);
      expect(result.reason).toContain(`not the pinned ${mesh.fingerprint}`);
      expect(result.reason).not.toContain("the-password-123");
      // every connection the dial made has closed and all it carried is recorded, however slowly
      await waitFor(fake.done, EVENT_WAIT_MS, "the impostor's connections to close");
      // the listener saw a TLS handshake (it did get a connection) and not one byte of protocol
      expect(fake.raw.length).toBeGreaterThan(0);
      expect(Buffer.concat(fake.plaintext).length).toBe(0);
      const everything = Buffer.concat([...fake.raw, ...fake.plaintext]).toString("latin1");
      expect(everything).not.toContain("CONNECT");
      expect(everything).not.toContain("the-password-123");
    } finally {
      fake.server.close();
    }
  }

  it("refuses a server with another certificate before sending CONNECT, and says the fingerprints", async () => {
    await refusedBeforeConnect();
  });

  it("control: the same listener does receive CONNECT when its own fingerprint is the pinned one", async () => {
    const fake = await impostor(other);
    try {
      const dialling = dial({
        servers: [fake.url],
        fingerprint: other.fingerprint,
        auth: { kind: "password", user: "node.alpha", password: "the-password-123" },
        inboxPrefix: "_INBOX.node.alpha",
        timeoutMs: EVENT_WAIT_MS,
      });
      const said = () => Buffer.concat(fake.plaintext).toString();
      // it never answers CONNECT: once CONNECT has arrived it hangs up, and the dial fails
      await waitFor(() => said().startsWith("CONNECT "), EVENT_WAIT_MS, "CONNECT at the impostor");
      fake.hangUp();
      expect((await dialling).ok).toBe(false);
      expect(said()).toMatch(/^CONNECT \{.*"user":"node\.alpha"/);
    } finally {
      fake.server.close();
    }
  });

  it("dials a pin it has seen with one connection: the preflight is the first dial's alone", async () => {
    const once = makeCert(dir, "once", "once");
    const fake = await impostor(once);
    const said = () => Buffer.concat(fake.plaintext).toString();
    const connects = () => said().split("CONNECT ").length - 1;
    const dialAt = () =>
      dial({
        servers: [fake.url],
        fingerprint: once.fingerprint,
        auth: { kind: "password", user: "node.alpha", password: "the-password-123" },
        inboxPrefix: "_INBOX.node.alpha",
        timeoutMs: EVENT_WAIT_MS,
      });
    try {
      const first = dialAt();
      await waitFor(() => connects() === 1, EVENT_WAIT_MS, "the first CONNECT at the impostor");
      // the preflight, then the dial
      expect(fake.connections()).toBe(2);
      fake.hangUp();
      await first;
      const before = fake.connections();
      const second = dialAt();
      await waitFor(() => connects() === 2, EVENT_WAIT_MS, "the second CONNECT at the impostor");
      expect(fake.connections() - before).toBe(1);
      fake.hangUp();
      expect((await second).ok).toBe(false);
    } finally {
      fake.server.close();
    }
  });

  it("once the pinned certificate is known, a server showing another is still refused before CONNECT", async () => {
    // the real server shows the pinned certificate: it is known from here on
    const membership = await mesh.admit("known");
    const good = await openLink(membership, "known", mesh.identityKey("known"));
    expect(good.ok).toBe(true);
    if (good.ok) await good.link.close();
    await refusedBeforeConnect(EVENT_WAIT_MS);
  });

  it("refuses the real server when another fingerprint is pinned", async () => {
    const membership = { ...(await mesh.admit("pinned")), fingerprint: other.fingerprint };
    const opened = await openLink(membership, "pinned", mesh.identityKey("pinned"));
    expect(opened).toMatchObject({ ok: false, kind: "pin" });
  });

  it("says a refused password (a v1 membership) in its own words naming the user, never the password", async () => {
    const { jwt: _jwt, ...bus } = (await mesh.admit("wrongpw")) as { jwt: string } & Record<string, unknown>;
    const membership = Membership.parse({ ...bus, password: "not-the-password-xyz" });
    const opened = await openLink(membership, "wrongpw", anyKey());
    expect(opened.ok).toBe(false);
    if (opened.ok) return;
    expect(opened.kind).toBe("auth");
    expect(opened.reason).toContain("refused node.wrongpw's credentials");
    expect(opened.reason).toContain("node.wrongpw");
    expect(opened.reason).toContain("removed from its mesh");
    expect(opened.reason).not.toMatch(/Authorization Violation/i);
    expect(opened.reason).not.toContain("not-the-password-xyz");
  });

  it("signs in with the identity key the user JWT names, and with no other", async () => {
    const membership = await mesh.admit("signer");
    const other = generateKeyPairSync("ed25519").privateKey;
    const wrong = await openLink(membership, "signer", other);
    expect(wrong).toMatchObject({ ok: false, kind: "membership" });
    const good = await openLink(membership, "signer", mesh.identityKey("signer"));
    expect(good.ok).toBe(true);
    if (good.ok) await good.link.close();
  });

  it("dials as the membership's user, never the bare name", async () => {
    const membership = await mesh.admit("exact");
    const identity = mesh.identityKey("exact");
    const opened = await openLink({ ...membership, user: "node.other" }, "exact", identity);
    expect(opened).toMatchObject({ ok: false, kind: "membership" });
    const good = await openLink(membership, "exact", identity);
    expect(good.ok).toBe(true);
    if (good.ok) {
      const connz = (await (await fetch(`${mesh.monitorUrl}/connz?auth=true`)).json()) as {
        connections: { authorized_user?: string; name?: string }[];
      };
      // a JWT user is its nkey on the server: the node's identity key, as a user nkey
      const user = mesh.server.users.find((u) => u.user === "node.exact")?.nkey;
      expect(connz.connections.map((c) => c.authorized_user)).toContain(user);
      await good.link.close();
    }
  });

  it("says a server that is down as unreachable, quickly", async () => {
    const port = await freePort();
    const started = Date.now();
    const result = await dial({
      servers: [`nats://127.0.0.1:${port}`],
      fingerprint: mesh.fingerprint,
      auth: { kind: "password", user: "node.alpha", password: "pw" },
      inboxPrefix: "_INBOX.node.alpha",
      timeoutMs: EVENT_WAIT_MS,
    });
    expect(result).toMatchObject({ ok: false, kind: "unreachable" });
    if (!result.ok) expect(result.reason).toContain("nothing listens there (connection refused)");
    // at the refusal, not at the dial's timeout, however busy the machine
    expect(Date.now() - started).toBeLessThan(EVENT_WAIT_MS / 2);
  });
});
