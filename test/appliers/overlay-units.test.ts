// The overlay's parts that need no machine: the schema refused on arrival field by field, what `wg show dump` and a
// found `[Interface]` say, the config the mesh writes, and the rekey's signature over its fixed text.
import { createPrivateKey } from "node:crypto";
import { describe, expect, it } from "vitest";
import { signRekey, verifyRekey } from "../../src/link/index.ts";
import { publicB64 } from "../../src/store/index.ts";
import { parseConfig, parseDump, rangeOf, renderConfig } from "../../src/system/arch/wireguard.ts";
import { type OverlayResource, parseDeclaration } from "../../src/vocabulary/index.ts";

const KEY = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
const overlay = (extra: Record<string, unknown> = {}) => ({
  id: "overlay",
  type: "overlay",
  interface: "mesh0",
  address: "10.78.0.1/24",
  listen_port: 51820,
  peers: [{ public_key: KEY, allowed_ips: ["10.78.0.2/32"], endpoint: "10.77.1.2:51821", keepalive_s: 25 }],
  ...extra,
});
const refusals = (r: unknown) => {
  const parsed = parseDeclaration({ v: 1, node: "n1", mode: "adopted", resources: [r] });
  return parsed.ok ? [] : parsed.refusals.map((x) => `${x.field}: ${x.reason}`);
};

describe("the overlay schema", () => {
  it("takes a declared overlay as overlay.md gives it", () => {
    expect(refusals(overlay({ mtu: 1380, takes: "wg0" }))).toEqual([]);
    expect(
      refusals(
        overlay({ peers: [{ public_key: KEY, allowed_ips: ["fd00::/64"], endpoint: "[fd00::2]:51820" }] }),
      ),
    ).toEqual([]);
    expect(
      refusals(
        overlay({ peers: [{ public_key: KEY, allowed_ips: ["10.0.0.0/8"], endpoint: "hub.example:51820" }] }),
      ),
    ).toEqual([]);
  });

  it("refuses on arrival, naming the field", () => {
    expect(refusals(overlay({ interface: "a-very-long-name0" }))).toEqual([
      "interface: must be at most 15 characters (an interface name)",
    ]);
    expect(refusals(overlay({ interface: "../wg0" }))[0]).toMatch(/^interface: "..\/wg0" is not a name: /);
    expect(refusals(overlay({ address: "10.78.0.1" }))[0]).toContain(
      "address: must be an address with a prefix length",
    );
    expect(refusals(overlay({ address: "10.78.0.1/33" }))[0]).toContain("prefix /33 is too long");
    expect(refusals(overlay({ takes: "mesh0" }))[0]).toContain("takes: names the interface itself");
    expect(refusals(overlay({ mtu: 100 }))[0]).toMatch(/^mtu: /);
    expect(refusals(overlay({ private_key: KEY }))).toEqual(["private_key: unknown field"]);
    expect(refusals(overlay({ peers: [{ public_key: "nope", allowed_ips: ["10.0.0.0/8"] }] }))[0]).toContain(
      "peers.0.public_key: must be a WireGuard public key",
    );
    expect(
      refusals(overlay({ peers: [{ public_key: KEY, allowed_ips: ["10.0.0.0/8"], endpoint: "hub" }] }))[0],
    ).toContain("peers.0.endpoint: must be host:port");
    const twice = { public_key: KEY, allowed_ips: ["10.0.0.0/8"] };
    expect(refusals(overlay({ peers: [twice, twice] }))[0]).toContain(
      "peers.1.public_key: is given more than once",
    );
    // a value is written into the config line by line: no line break gets through
    expect(
      refusals(overlay({ peers: [{ public_key: KEY, allowed_ips: ["10.0.0.0/8\nPostUp = x"] }] })),
    ).not.toEqual([]);
  });
});

describe("an overlay among the other resources", () => {
  const together = (...resources: unknown[]) => {
    const parsed = parseDeclaration({ v: 1, node: "n1", mode: "adopted", resources });
    return parsed.ok ? [] : parsed.refusals.map((x) => `${x.id}.${x.field}: ${x.reason}`);
  };

  it("refuses two overlays on one interface, one tunnel taken twice, and taking an interface the mesh declares", () => {
    expect(together(overlay(), overlay({ id: "second", address: "10.79.0.1/24" }))).toEqual([
      'second.interface: mesh0 is also declared by "overlay"',
    ]);
    expect(
      together(overlay({ takes: "wg0" }), overlay({ id: "second", interface: "mesh1", takes: "wg0" })),
    ).toEqual(['second.takes: wg0 is also taken by "overlay"']);
    expect(together(overlay(), overlay({ id: "second", interface: "mesh1", takes: "mesh0" }))).toEqual([
      'second.takes: mesh0 is the interface "overlay" declares: a tunnel the mesh declares is not found, it is the mesh\'s',
    ]);
  });

  it("refuses a file or directory at the config the overlay writes, and takes one beside it", () => {
    const file = { id: "conf", type: "file", path: "/etc/wireguard/mesh0.conf", content: "[Interface]\n" };
    expect(together(overlay(), file)).toEqual([
      'conf.path: is the configuration the overlay "overlay" writes; declare the tunnel there, not its file',
    ]);
    expect(
      together(overlay(), { id: "d", type: "directory", path: "/etc/wireguard/mesh0.conf" }),
    ).toHaveLength(1);
    expect(together(overlay(), { ...file, path: "/etc/wireguard/other.conf" })).toEqual([]);
    expect(together(file)).toEqual([]);
  });
});

describe("what WireGuard says", () => {
  it("parses `wg show <if> dump`: the interface line, then each peer with its last handshake", () => {
    const dump = parseDump(
      "cHJpdmF0ZQ==\tcHVibGlj\t51820\toff\n" +
        "cGVlcg==\t(none)\t10.77.1.2:51821\t10.78.0.2/32,fd00::2/128\t1796232947\t436\t348\t25\n" +
        "b3RoZXI=\t(none)\t(none)\t(none)\t0\t0\t0\toff\n",
    );
    expect(dump).toEqual({
      privateKey: "cHJpdmF0ZQ==",
      publicKey: "cHVibGlj",
      port: 51820,
      peers: [
        {
          publicKey: "cGVlcg==",
          endpoint: "10.77.1.2:51821",
          allowedIps: ["10.78.0.2/32", "fd00::2/128"],
          latestHandshake: 1796232947,
          keepalive: 25,
        },
        { publicKey: "b3RoZXI=", endpoint: null, allowedIps: [], latestHandshake: 0, keepalive: 0 },
      ],
    });
    expect(parseDump("")).toBeNull();
  });

  it("reads a found [Interface]: addresses, port, MTU (0 when none), and counts its peers", () => {
    const text =
      "# by hand\n[Interface]\nPrivateKey = abc\nAddress = 10.78.0.1/24, fd00::1/64\nListenPort = 51820\nMTU = 1380 # tuned\n" +
      "\n[Peer]\nPublicKey = x\nAllowedIPs = 10.78.0.2/32\n\n[Peer]\nPublicKey = y\nMTU = 9000\n";
    expect(parseConfig(text)).toEqual({
      privateKey: "abc",
      addresses: ["10.78.0.1/24", "fd00::1/64"],
      listenPort: 51820,
      mtu: 1380,
      peers: 2,
    });
    expect(parseConfig("[Interface]\nAddress = 10.0.0.1/8\n").mtu).toBe(0);
  });

  it("the range an address is in", () => {
    expect(rangeOf("10.78.0.7/24")).toBe("10.78.0.0/24");
    expect(rangeOf("10.78.3.7/16")).toBe("10.78.0.0/16");
    expect(rangeOf("10.78.0.7/32")).toBe("10.78.0.7/32");
    expect(rangeOf("fd00:1:2:3::7/64")).toBe("fd00:1:2:3::/64");
  });

  it("writes the node's key into the config, an MTU line only when declared", () => {
    const r = overlay({ mtu: 1380 }) as OverlayResource;
    const text = renderConfig(r, "PRIVATE");
    expect(text).toContain(
      "[Interface]\nPrivateKey = PRIVATE\nAddress = 10.78.0.1/24\nListenPort = 51820\nMTU = 1380\n",
    );
    expect(text).toContain(
      `[Peer]\nPublicKey = ${KEY}\nAllowedIPs = 10.78.0.2/32\nEndpoint = 10.77.1.2:51821\nPersistentKeepalive = 25\n`,
    );
    expect(renderConfig(overlay() as OverlayResource, "PRIVATE")).not.toContain("MTU");
  });
});

describe("the rekey", () => {
  // a fixed identity so the signed text and the signature are the same every run (Ed25519 is deterministic)
  const identity = createPrivateKey({
    key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.alloc(32, 7)]),
    format: "der",
    type: "pkcs8",
  });
  const identityPublic = publicB64(identity);
  const body = {
    v: 1 as const,
    node: "hub",
    left: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    taken: KEY,
    tunnel: {
      interface: "wg0",
      port: 51820,
      address: "10.78.0.1",
      range: "10.78.0.0/24",
      peers: 1,
      mtu: 1380,
    },
  };

  const bytes = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

  it("is a signed node message: {v:2, body, sig}, the body the rekey's JSON, signed the same way twice", () => {
    const signed = signRekey(body, identity);
    expect(signed.body).toEqual(body);
    expect(signed.signed).toEqual({
      v: 2,
      body: JSON.stringify(body),
      sig: expect.stringMatching(/^[A-Za-z0-9+/]{86}==$/),
    });
    expect(signRekey(body, identity).signed.sig).toBe(signed.signed.sig);
  });

  it("verifies against the identity key, and nothing changed verifies", () => {
    const { signed } = signRekey(body, identity);
    expect(verifyRekey(bytes(signed), "hub", identityPublic)).toEqual({ ok: true, rekey: body });
    const changed = (b: object) => bytes({ ...signed, body: JSON.stringify({ ...body, ...b }) });
    expect(verifyRekey(changed({ taken: body.left }), "hub", identityPublic)).toMatchObject({ ok: false });
    expect(
      verifyRekey(changed({ tunnel: { ...body.tunnel, mtu: 1420 } }), "hub", identityPublic),
    ).toMatchObject({
      ok: false,
      reason: "the signature does not verify against hub's enrolled identity key",
    });
    expect(verifyRekey(bytes({ ...signed, extra: 1 }), "hub", identityPublic)).toMatchObject({ ok: false });
    expect(verifyRekey(bytes(signed), "other", identityPublic)).toMatchObject({ ok: false });
  });
});
