// Issue 27, item 18: the enrolment's inbox is subscribed before its question is published, so the answer can
// never arrive to nobody. Read off the wire: a listener that speaks just enough NATS over TLS to be dialled
// (INFO, then TLS with its own certificate, which the code pins; PONG to each PING) records, in order, every
// protocol line the enrolling node sends.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, connect as tcpConnect } from "node:net";
import { arch, hostname, platform, tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import { afterAll, describe, expect, it } from "vitest";
import { VERSION } from "../../src/defaults.ts";
import { ask } from "../../src/link/index.ts";
import { makeKeys, publicKeys } from "../../src/store/keys.ts";
import { makeCert } from "../mesh/index.ts";

const dirs: string[] = [];
const servers: Server[] = [];
afterAll(() => {
  for (const s of servers) s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The listener: its URL, its certificate's fingerprint, and the protocol lines it was sent, in order. */
async function listener() {
  const dir = mkdtempSync(join(tmpdir(), "enrol-order-"));
  dirs.push(dir);
  const cert = makeCert(dir, "order", "order");
  const lines: string[] = [];
  const inner = createTlsServer({ cert: cert.certPem, key: cert.keyPem }, (tls) => {
    let buffered = "";
    tls.on("error", () => undefined);
    tls.on("data", (d: Buffer) => {
      buffered += d.toString("latin1");
      let eol = buffered.indexOf("\r\n");
      while (eol >= 0) {
        const line = buffered.slice(0, eol);
        buffered = buffered.slice(eol + 2);
        // a PUB's payload is the next line: kept with it, never parsed as a command
        if (/^(PUB|HPUB) /.test(line)) {
          const size = Number(line.split(" ").at(-1));
          buffered = buffered.slice(size + 2);
        }
        lines.push(line);
        if (line === "PING") tls.write("PONG\r\n");
        eol = buffered.indexOf("\r\n");
      }
    });
  });
  inner.on("tlsClientError", () => undefined);
  await new Promise<void>((resolve) => inner.listen(0, "127.0.0.1", resolve));
  const innerPort = (inner.address() as { port: number }).port;
  const outer = createServer((client) => {
    client.on("error", () => undefined);
    const info = {
      server_id: "ORDER",
      version: "2.9.10",
      proto: 1,
      tls_required: true,
      max_payload: 1048576,
    };
    client.write(`INFO ${JSON.stringify(info)}\r\n`);
    const upstream = tcpConnect(innerPort, "127.0.0.1");
    upstream.on("error", () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  outer.on("close", () => inner.close());
  await new Promise<void>((resolve) => outer.listen(0, "127.0.0.1", resolve));
  servers.push(outer);
  const port = (outer.address() as { port: number }).port;
  return { url: `nats://127.0.0.1:${port}`, fingerprint: cert.fingerprint, lines };
}

describe("the enrolment's order on the wire", () => {
  it("SUB of its reply tail comes before the PUB of its question", async () => {
    const bus = listener();
    const { url, fingerprint, lines } = await bus;
    const keys = makeKeys();
    const node = "order";
    // nobody acknowledges the question here: the ask ends on its own, and what it sent is what is read
    await ask(
      { servers: [url], fingerprint, transport: "nats" },
      {
        node,
        credential: { token: "t".repeat(43) },
        keys: publicKeys(keys),
        sealing: keys.sealing.privateKey,
        facts: { os: platform(), arch: arch(), hostname: hostname(), version: VERSION },
      },
      { timeoutMs: 1000 },
    );
    const tail = new RegExp(`^SUB _INBOX\\.enrol\\.${node}\\.[0-9a-f]{24} `);
    const sub = lines.findIndex((l) => tail.test(l));
    const pub = lines.findIndex(
      (l) => l.startsWith(`PUB mesh.enrol.${node} `) || l.startsWith(`HPUB mesh.enrol.${node} `),
    );
    expect(lines.some((l) => l.startsWith("CONNECT "))).toBe(true);
    expect(sub, lines.join("\n")).toBeGreaterThanOrEqual(0);
    expect(pub, lines.join("\n")).toBeGreaterThan(sub);
  });
});
