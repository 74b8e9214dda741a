// The overlay on machines without systemd (wg-quick runs the interface): two network namespaces joined by a
// veth pair, wireguard-go in each. A found tunnel is taken over in place, proven by a handshake before it is
// retired, and never left without a tunnel: a takeover that would not match is refused with nothing stopped,
// and a mesh interface that will not start has the found one started again.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { overlayStatus, overlayStatusLines } from "../../src/cli/commands/overlay.ts";
import { OverlayState } from "../../src/store/index.ts";
import { findTunnel, readInterface } from "../../src/system/arch/wireguard.ts";
import { freshOverlayNode, hubTunnel, spokeTunnel } from "../support/overlay-pair.ts";
import {
  isUp,
  lastHandshake,
  type Machine,
  mtuOf,
  netnsMachine,
  type OverlayNode,
  pings,
  plantTunnel,
  seaNode,
  type TunnelSpec,
  type WgKey,
  wgKey,
  wire,
} from "../support/wireguard.ts";

const machines: Machine[] = [];
afterEach(async () => {
  await Promise.all(machines.splice(0).map((m) => m.stop()));
});

interface Pair {
  hub: Machine;
  spoke: Machine;
  hubKey: WgKey;
  spokeKey: WgKey;
  under: { a: string; b: string };
  /** The hub's found tunnel: 10.78.0.1/24 on 51820 at MTU 1380, the spoke its one peer. */
  found: TunnelSpec;
}

/** A hub with a found tunnel `wg0` and a spoke dialling it, the spoke pinging the hub through it. */
async function pair(opts: { plant?: boolean } = {}): Promise<Pair> {
  const [hub, spoke] = await Promise.all([netnsMachine(), netnsMachine()]);
  machines.push(hub, spoke);
  const under = await wire(hub, spoke, 1);
  const [hubKey, spokeKey] = [wgKey(), wgKey()];
  const found = hubTunnel(hubKey, spokeKey);
  if (opts.plant !== false) await plantTunnel(hub, "wg0", found);
  await plantTunnel(spoke, "wg0", spokeTunnel(spokeKey, hubKey, under.a));
  return { hub, spoke, hubKey, spokeKey, under, found };
}

const decl = (resources: unknown[]) => ({ v: 1, node: "hub", mode: "adopted", resources });
const nothing = { v: 1, node: "hub", mode: "adopted", resources: [], owns_nothing: true };

/** The overlay the mesh composes from the found tunnel: its port, address and MTU, the spoke its peer. */
function takes(p: Pair, extra: Record<string, unknown> = {}, peer: Record<string, unknown> = {}) {
  return decl([
    {
      id: "overlay",
      type: "overlay",
      interface: "mesh0",
      address: "10.78.0.1/24",
      listen_port: 51820,
      mtu: 1380,
      peers: [{ public_key: p.spokeKey.public, allowed_ips: ["10.78.0.2/32"], ...peer }],
      takes: "wg0",
      ...extra,
    },
  ]);
}

const wgConf = (m: Machine, iface: string) => join(m.root, "etc/wireguard", `${iface}.conf`);
const statusOf = (node: OverlayNode) =>
  overlayStatusLines(overlayStatus(new OverlayState(node.state), node.state.readRecords().records)).join(
    "\n",
  );
const step = (r: { report: { steps: { id: string; did: string; detail: string }[] } }) => r.report.steps[0]!;

describe("found tunnels", () => {
  it("finds the one tunnel up: port, address, range and peers from wg, MTU from its [Interface] (0 when none)", async () => {
    const p = await pair();
    const found = await findTunnel(p.hub.exec, p.hub.root, new Set());
    expect(found.kind).toBe("one");
    if (found.kind !== "one") return;
    expect(found.found.tunnel).toEqual({
      interface: "wg0",
      port: 51820,
      address: "10.78.0.1",
      range: "10.78.0.0/24",
      peers: 1,
      mtu: 1380,
    });
    expect(found.found.privateKey).toBe(p.hubKey.private);
    // the spoke's config names no MTU: 0, so the mesh writes no MTU line
    const spoke = await findTunnel(p.spoke.exec, p.spoke.root, new Set());
    expect(spoke.kind === "one" && spoke.found.tunnel.mtu).toBe(0);
    // the mesh's own interface is not a tunnel to take; two others are not one
    expect((await findTunnel(p.hub.exec, p.hub.root, new Set(["wg0"]))).kind).toBe("none");
    await plantTunnel(p.hub, "wg1", { key: wgKey(), address: "10.79.0.1/24", port: 51900, peers: [] });
    expect(await findTunnel(p.hub.exec, p.hub.root, new Set())).toEqual({
      kind: "many",
      interfaces: ["wg0", "wg1"],
    });
  });
});

describe("overlay without a takeover", () => {
  it("writes the config 0600 with the node's key, brings it up, reads it back, repairs drift, and undeclared goes down and away", async () => {
    const p = await pair({ plant: false });
    const node = freshOverlayNode(p.hub, p.hubKey);
    const d = decl([
      {
        id: "overlay",
        type: "overlay",
        interface: "mesh0",
        address: "10.78.0.1/24",
        listen_port: 51820,
        peers: [{ public_key: p.spokeKey.public, allowed_ips: ["10.78.0.2/32"] }],
      },
    ]);
    const plan = await node.apply(d, { dryRun: true });
    expect(plan.plan.map((s) => s.did)).toEqual(["created"]);
    expect(existsSync(wgConf(p.hub, "mesh0"))).toBe(false);
    const first = await node.apply(d);
    expect(step(first).did, step(first).detail).toBe("created");
    expect(step(first).detail).toContain("read back: port 51820, 1 peer(s), MTU 1420");
    expect(statSync(wgConf(p.hub, "mesh0")).mode & 0o7777).toBe(0o600);
    expect(readFileSync(wgConf(p.hub, "mesh0"), "utf8")).toContain(`PrivateKey = ${p.hubKey.private}`);
    // no MTU declared: no MTU line, and the kernel's default for the path
    expect(readFileSync(wgConf(p.hub, "mesh0"), "utf8")).not.toContain("MTU");
    // the key is in the file wg-quick reads and nowhere the report goes
    expect(JSON.stringify(first)).not.toContain(p.hubKey.private);
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
    expect(step(await node.apply(d)).did).toBe("unchanged");
    // brought down by hand: put back
    await p.hub.must("wg-quick", "down", "mesh0");
    const again = await node.apply(d);
    expect(step(again).did, step(again).detail).toBe("repaired");
    expect(await isUp(p.hub, "mesh0")).toBe(true);
    // undeclared: down, and the config the mesh made removed
    const gone = await node.apply(nothing);
    expect(step(gone).did, step(gone).detail).toBe("removed");
    expect(await isUp(p.hub, "mesh0")).toBe(false);
    expect(existsSync(wgConf(p.hub, "mesh0"))).toBe(false);
  });
});

describe("taking a found tunnel over", () => {
  it("holds the found config, stops the found tunnel, brings the mesh's up on its port, address, key and MTU; retires it only after a handshake, and nothing writes it back", async () => {
    const p = await pair();
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
    const node = freshOverlayNode(p.hub, p.hubKey);
    const foundConf = readFileSync(wgConf(p.hub, "wg0"));

    // the plan says what the apply will do, and does none of it
    const plan = await node.apply(takes(p), { dryRun: true });
    expect(plan.plan[0]?.detail).toContain(
      "take over wg0 (port 51820, range 10.78.0.0/24, 1 peer(s), MTU 1380)",
    );
    expect(await isUp(p.hub, "wg0")).toBe(true);

    // a hub's composition names no endpoint for its spoke: nothing handshakes until the spoke speaks again
    // (the built executable, run in the hub's namespaces as its operator would)
    const taken = await seaNode(node).apply(takes(p));
    const first = taken.report!.steps[0]!;
    expect(first.did, first.detail + taken.stderr).toBe("created");
    expect(first.detail).toContain(
      "takeover of wg0: taken (port 51820, range 10.78.0.0/24, 1 peer(s), MTU 1380",
    );
    // kept, and no digest of it said: the configuration carries a private key
    expect(first.detail).toContain("original kept in holds)");
    const keptDigest = createHash("sha256").update(foundConf).digest("hex");
    expect(JSON.stringify(taken.report)).not.toContain(keptDigest.slice(0, 12));
    // the takeover's own report says why the found configuration is kept, as every later one does
    expect(first.detail).toContain(
      "mesh0 up in its place; wg0's configuration kept: no peer has handshaken with mesh0 yet",
    );
    expect(await isUp(p.hub, "wg0")).toBe(false);
    const live = await readInterface(p.hub.exec, "mesh0");
    expect(live.kind === "up" && live.dump.publicKey).toBe(p.hubKey.public);
    expect(live.kind === "up" && live.dump.port).toBe(51820);
    // MTU 1380 carried over, not the 1420 default
    expect(await mtuOf(p.hub, "mesh0")).toBe(1380);
    // the found configuration held, and still where its unit reads it: not yet proven
    expect(readFileSync(wgConf(p.hub, "wg0"))).toEqual(foundConf);
    expect(taken.report!.holds).toEqual([{ id: "overlay", path: "/etc/wireguard/wg0.conf" }]);
    expect(node.state.readRecords().records.overlay).toMatchObject({
      takeover: { state: "taken", interface: "wg0" },
    });
    expect(statusOf(node)).toMatch(
      /^mesh0 \(\/etc\/wireguard\/mesh0.conf\) takes wg0: taken \(port 51820, range 10.78.0.0\/24, 1 peer\(s\), MTU 1380\) at .*; wg0's configuration held until a peer handshakes with mesh0$/,
    );

    const unproven = await node.apply(takes(p));
    expect(step(unproven).did).toBe("unchanged");
    expect(step(unproven).detail).toContain(
      "wg0's configuration kept: no peer has handshaken with mesh0 yet",
    );
    expect(existsSync(wgConf(p.hub, "wg0"))).toBe(true);

    // the composition gains the spoke's endpoint: mesh0 handshakes at once, and the spoke pings through it
    const withEndpoint = takes(p, {}, { endpoint: `${p.under.b}:51821`, keepalive_s: 25 });
    const updated = await node.apply(withEndpoint);
    expect(step(updated).did, step(updated).detail).toBe("updated");
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
    expect(await lastHandshake(p.hub, "mesh0")).toBeGreaterThan(0);

    const retired = await node.apply(withEndpoint);
    expect(step(retired).did, step(retired).detail).toBe("updated");
    expect(step(retired).detail).toMatch(/wg0's configuration retired: peer .{8}… handshook with mesh0 at /);
    expect(existsSync(wgConf(p.hub, "wg0"))).toBe(false);
    expect(node.originals.list()).toEqual([]);
    const ledger = JSON.parse(readFileSync(join(node.stateDir, "overlay-retired.json"), "utf8"));
    expect(ledger.retired.wg0).toMatchObject({ path: "/etc/wireguard/wg0.conf", by: "mesh0" });
    // its kept original left as it was
    expect(readFileSync(join(node.stateDir, ledger.retired.wg0.kept))).toEqual(foundConf);
    expect(statusOf(node)).toContain(
      `wg0 retired at ${ledger.retired.wg0.at}, its original at ${join(node.stateDir, ledger.retired.wg0.kept)}`,
    );

    // later applies find it retired rather than missing
    const later = await node.apply(withEndpoint);
    expect(step(later).did).toBe("unchanged");
    expect(step(later).detail).toContain("wg0 was retired at");
    expect(existsSync(wgConf(p.hub, "wg0"))).toBe(false);

    // raised by hand beside the mesh's (on another port, as the old one is held): looked at again, then refused
    writeFileSync(
      wgConf(p.hub, "wg0"),
      foundConf.toString().replace("ListenPort = 51820", "ListenPort = 51830"),
      {
        mode: 0o600,
      },
    );
    await p.hub.must("wg-quick", "up", "wg0");
    const beside = await node.apply(withEndpoint);
    expect(beside.exit).toBe(2);
    expect(beside.report.refusals[0]?.reason).toContain(
      "wg0 is up again beside mesh0, raised by hand: `wg-quick down wg0`",
    );
    await p.hub.must("wg-quick", "down", "wg0");
    // the file put back by hand is left as it is: not held afresh, not removed again
    const putBack = await node.apply(withEndpoint);
    expect(step(putBack).detail).toContain(
      "/etc/wireguard/wg0.conf was put back by hand; it is left as it is",
    );
    expect(node.originals.list()).toEqual([]);

    // undeclared: the mesh's interface down and its config removed; the retired tunnel is not written back
    const gone = await node.apply(nothing);
    expect(step(gone).did, step(gone).detail).toBe("removed");
    expect(step(gone).detail).toContain("wg0 was retired: nothing of it is written back");
    expect(await isUp(p.hub, "mesh0")).toBe(false);
    expect(await isUp(p.hub, "wg0")).toBe(false);
    expect(existsSync(wgConf(p.hub, "mesh0"))).toBe(false);
  });

  it("refuses a takeover that would not keep the found MTU or range, naming both values, with nothing stopped", async () => {
    const p = await pair();
    const node = freshOverlayNode(p.hub, p.hubKey);
    const sea = seaNode(node);
    // the seeds' regression: a path tuned to 1380 brought up at 1420
    const mtu = await sea.apply(takes(p, { mtu: 1420 }));
    expect(mtu.exit).toBe(2);
    expect(mtu.stderr).toContain('resource "overlay", field "mtu"');
    expect(mtu.stderr).toContain(
      "takeover of wg0: not taken (port 51820, range 10.78.0.0/24, 1 peer(s), MTU 1380; left running)",
    );
    expect(mtu.stderr).toContain(
      "wg0 runs at MTU 1380 (its [Interface] says so) and the declaration says 1420",
    );
    expect(mtu.stderr).toContain("(declare mtu: 1380)");
    const none = await sea.apply(takes(p, { mtu: undefined }));
    expect(none.stderr).toContain(
      "wg0 runs at MTU 1380 (its [Interface] says so) and the declaration gives none",
    );
    const range = await sea.apply(takes(p, { address: "10.78.0.1/16" }));
    expect(range.exit).toBe(2);
    expect(range.stderr).toContain(
      "wg0's range is 10.78.0.0/24 and the declaration's 10.78.0.1/16 makes it 10.78.0.0/16",
    );
    // the spoke's wg0 names no MTU: one declared would change what its path runs at just the same
    const spoke = seaNode(freshOverlayNode(p.spoke, p.spokeKey));
    const peer = { public_key: p.hubKey.public, allowed_ips: ["10.78.0.1/32"] };
    const some = await spoke.apply(
      takes(p, { address: "10.78.0.2/24", listen_port: 51821, mtu: 1420, peers: [peer] }),
    );
    expect(some.exit).toBe(2);
    expect(some.stderr).toContain(
      "wg0 names no MTU (wg-quick sets one) and the declaration says 1420: the path was tuned to what was found",
    );
    expect(some.stderr).toContain("(declare no mtu)");
    expect(await isUp(p.spoke, "wg0")).toBe(true);
    // nothing was stopped, written or held
    expect(await isUp(p.hub, "wg0")).toBe(true);
    expect(await mtuOf(p.hub, "wg0")).toBe(1380);
    expect(await isUp(p.hub, "mesh0")).toBe(false);
    expect(existsSync(wgConf(p.hub, "mesh0"))).toBe(false);
    expect(node.originals.list()).toEqual([]);
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
  });

  it("refuses a takeover that would not match — port, address, key, MTU — naming the remedy, with nothing stopped", async () => {
    const p = await pair();
    const node = freshOverlayNode(p.hub, p.hubKey);
    const refused = async (d: unknown) => {
      const r = await node.apply(d);
      expect(r.exit).toBe(2);
      expect(r.report.steps).toEqual([]);
      return r.report.refusals[0]!;
    };
    const port = await refused(takes(p, { listen_port: 51999 }));
    expect(port.reason).toContain(
      "takeover of wg0: not taken (port 51820, range 10.78.0.0/24, 1 peer(s), MTU 1380; left running)",
    );
    expect(port.reason).toContain("wg0 listens on 51820 and the declaration says 51999");
    expect((await refused(takes(p, { address: "10.78.0.9/24" }))).reason).toContain(
      "wg0 is at 10.78.0.1 and the declaration says 10.78.0.9",
    );
    expect((await refused(takes(p, { mtu: undefined }))).reason).toContain("wg0 runs at MTU 1380");
    expect((await refused(takes(p, { takes: "wg7" }))).reason).toContain("no interface wg7 is up");
    // a node whose overlay key is not the tunnel's
    const other = freshOverlayNode(p.hub, wgKey());
    const key = await other.apply(takes(p));
    expect(key.exit).toBe(2);
    expect(key.report.refusals[0]?.reason).toContain("`mesh-host overlay take --tunnel wg0`");
    // nothing was stopped, written or held
    expect(await isUp(p.hub, "wg0")).toBe(true);
    expect(await isUp(p.hub, "mesh0")).toBe(false);
    expect(existsSync(wgConf(p.hub, "mesh0"))).toBe(false);
    expect(node.originals.list()).toEqual([]);
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
  });

  it("a mesh interface that fails to start has the found tunnel started again, and the peer still pings", async () => {
    const p = await pair();
    const node = freshOverlayNode(p.hub, p.hubKey);
    // something else already holds the name: wg-quick up mesh0 refuses
    await p.hub.must("ip", "link", "add", "mesh0", "type", "veth", "peer", "name", "mesh0p");
    const failed = await node.apply(takes(p));
    expect(failed.exit).toBe(1);
    expect(step(failed).did).toBe("failed");
    expect(step(failed).detail).toContain("takeover of wg0: not taken");
    expect(step(failed).detail).toContain("mesh0 did not start");
    expect(step(failed).detail).toContain("wg0 started again");
    expect(await isUp(p.hub, "wg0")).toBe(true);
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
    expect(node.state.readRecords().records.overlay).toMatchObject({ takeover: { state: "not taken" } });
    // the name freed, the same declaration takes it: the hold kept once, not grown
    await p.hub.must("ip", "link", "del", "mesh0");
    const taken = await node.apply(takes(p));
    expect(step(taken).detail).toContain("takeover of wg0: taken");
    expect(node.originals.list()).toEqual([
      // held, its digest never listed: the configuration carries a private key
      { path: "/etc/wireguard/wg0.conf", kept: 0 },
    ]);
  });

  it("undeclared before it was proven: the mesh's interface goes and the found tunnel is given back as it was", async () => {
    const p = await pair();
    const node = freshOverlayNode(p.hub, p.hubKey);
    const before = readFileSync(wgConf(p.hub, "wg0"));
    expect(step(await node.apply(takes(p))).detail).toContain("takeover of wg0: taken");
    const gone = await node.apply(nothing);
    expect(step(gone).did, step(gone).detail).toBe("removed");
    expect(step(gone).detail).toContain("wg0 given back as found");
    expect(await isUp(p.hub, "mesh0")).toBe(false);
    expect(existsSync(wgConf(p.hub, "mesh0"))).toBe(false);
    expect(await isUp(p.hub, "wg0")).toBe(true);
    expect(readFileSync(wgConf(p.hub, "wg0"))).toEqual(before);
    expect(node.originals.list()).toEqual([]);
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
  });

  it("a host that died after stopping the found tunnel finds the takeover in its journal, and brings its own interface up", async () => {
    const p = await pair();
    const node = freshOverlayNode(p.hub, p.hubKey);
    expect(step(await node.apply(takes(p))).detail).toContain("takeover of wg0: taken");
    // as a crash leaves it: the found tunnel stopped, the mesh's not up, the journal saying `down`, no record
    await p.hub.must("wg-quick", "down", "mesh0");
    const journal = join(node.stateDir, "overlay-takeover.json");
    writeFileSync(journal, readFileSync(journal, "utf8").replace('"state": "taken"', '"state": "down"'));
    node.state.writeRecords({}, []);
    expect(statusOf(node)).toBe("(none declared)");
    const again = await node.apply(takes(p));
    expect(step(again).detail).toContain("wg0 was left down by the last attempt; taking it over again");
    expect(step(again).detail).toContain("takeover of wg0: taken");
    expect(await isUp(p.hub, "mesh0")).toBe(true);
    expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
  });
});
