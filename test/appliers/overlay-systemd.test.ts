// The overlay where systemd runs it: a container with systemd as PID 1 on a private network, its found tunnel
// run by wg-quick@wg0, a spoke in a network namespace dialling it. The unit-level parts of a takeover: the
// found unit stopped and disabled, the mesh's enabled and started, and put back when the mesh's will not start.
import { existsSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { freshOverlayNode, hubTunnel, spokeTunnel } from "../support/overlay-pair.ts";
import { tempDir } from "../support/tmp.ts";
import {
  isUp,
  type Machine,
  mtuOf,
  netnsMachine,
  overlayNode,
  pings,
  plantTunnel,
  systemdMachine,
  unitState,
  type WgKey,
  wgKey,
  wire,
} from "../support/wireguard.ts";

let hub: Machine;
let spoke: Machine;
let hubKey: WgKey;
let spokeKey: WgKey;
let under: { a: string; b: string };

beforeEach(async () => {
  [hub, spoke] = await Promise.all([systemdMachine(), netnsMachine()]);
  under = await wire(hub, spoke, 2);
  [hubKey, spokeKey] = [wgKey(), wgKey()];
  await plantTunnel(spoke, "wg0", spokeTunnel(spokeKey, hubKey, under.a));
});

afterEach(async () => {
  await Promise.all([hub?.stop(), spoke?.stop()]);
});

const found = (how: "init" | "by hand" = "init") => plantTunnel(hub, "wg0", hubTunnel(hubKey, spokeKey), how);

const takes = () => ({
  v: 1,
  node: "hub",
  mode: "adopted",
  resources: [
    {
      id: "overlay",
      type: "overlay",
      interface: "mesh0",
      address: "10.78.0.1/24",
      listen_port: 51820,
      mtu: 1380,
      peers: [
        {
          public_key: spokeKey.public,
          allowed_ips: ["10.78.0.2/32"],
          endpoint: `${under.b}:51821`,
          keepalive_s: 25,
        },
      ],
      takes: "wg0",
    },
  ],
});
const nothing = { v: 1, node: "hub", mode: "adopted", resources: [], owns_nothing: true };
const detail = (r: { report: { steps: { detail: string }[] } }) => r.report.steps[0]?.detail ?? "";

describe("overlay under systemd (wg-quick@)", () => {
  it("takes wg-quick@wg0 over: found unit stopped and disabled, wg-quick@mesh0 enabled and active, the spoke pings; retired after its handshake", async () => {
    await found();
    expect(await pings(spoke, "10.78.0.1")).toBe(true);
    const node = freshOverlayNode(hub, hubKey);
    const taken = await node.apply(takes());
    expect(taken.exit, detail(taken)).toBe(0);
    expect(detail(taken)).toContain(
      "takeover of wg0: taken (port 51820, range 10.78.0.0/24, 1 peer(s), MTU 1380",
    );
    expect(await unitState(hub, "wg-quick@wg0")).toEqual({ active: "inactive", enabled: "disabled" });
    expect(await unitState(hub, "wg-quick@mesh0")).toEqual({ active: "active", enabled: "enabled" });
    expect(await mtuOf(hub, "mesh0")).toBe(1380);
    expect(await pings(spoke, "10.78.0.1")).toBe(true);
    expect(existsSync(join(hub.root, "etc/wireguard/wg0.conf"))).toBe(true);

    const retired = await node.apply(takes());
    expect(detail(retired)).toContain("wg0's configuration retired");
    expect(existsSync(join(hub.root, "etc/wireguard/wg0.conf"))).toBe(false);

    const gone = await node.apply(nothing);
    expect(gone.exit, detail(gone)).toBe(0);
    expect(await unitState(hub, "wg-quick@mesh0")).toEqual({ active: "inactive", enabled: "disabled" });
    expect(existsSync(join(hub.root, "etc/wireguard/mesh0.conf"))).toBe(false);
    // retired: not written back, its unit not started
    expect(await unitState(hub, "wg-quick@wg0")).toEqual({ active: "inactive", enabled: "disabled" });
  });

  it("a found unit started again by hand beside the mesh's is said, never stopped (issue 27, item 18)", async () => {
    await found();
    const node = freshOverlayNode(hub, hubKey);
    const taken = await node.apply(takes());
    expect(taken.exit, detail(taken)).toBe(0);
    // someone starts the found tunnel again, on a port of its own (on the mesh's it could not listen)
    const conf = join(hub.root, "etc/wireguard/wg0.conf");
    writeFileSync(conf, readFileSync(conf, "utf8").replace(/ListenPort\s*=\s*51820/, "ListenPort = 51829"));
    await hub.must("systemctl", "start", "wg-quick@wg0");
    expect(await unitState(hub, "wg-quick@wg0")).toMatchObject({ active: "active" });
    const again = await node.apply(takes());
    expect(again.exit, detail(again)).toBe(0);
    expect(detail(again)).toContain(
      "wg-quick@wg0 was started again by hand beside mesh0: it is left running, not stopped",
    );
    expect(await unitState(hub, "wg-quick@wg0")).toMatchObject({ active: "active" });
    expect(await isUp(hub, "wg0")).toBe(true);
    expect(await unitState(hub, "wg-quick@mesh0")).toEqual({ active: "active", enabled: "enabled" });
  });

  it("retirement's guards: a configuration turned into a link, or a path the mesh writes, is kept and said (issue 27, item 18)", async () => {
    await found();
    const node = freshOverlayNode(hub, hubKey);
    expect((await node.apply(takes())).exit).toBe(0);
    const conf = join(hub.root, "etc/wireguard/wg0.conf");
    // a link where the found configuration was: never followed, never removed, nor what it points at
    const elsewhere = join(hub.root, "root/wg0.conf");
    mkdirSync(join(hub.root, "root"), { recursive: true });
    writeFileSync(elsewhere, readFileSync(conf));
    rmSync(conf);
    symlinkSync("/root/wg0.conf", conf);
    const linked = await node.apply(takes());
    expect(detail(linked)).toContain("wg0's configuration kept:");
    expect(detail(linked)).toContain("symbolic link");
    expect(lstatSync(conf).isSymbolicLink()).toBe(true);
    expect(existsSync(elsewhere)).toBe(true);
    // put back, but now a path the mesh itself writes: kept, and said
    rmSync(conf);
    writeFileSync(conf, readFileSync(elsewhere), { mode: 0o600 });
    const declared = takes();
    declared.resources.push({
      id: "wg0-conf",
      type: "file",
      path: "/etc/wireguard/wg0.conf",
      content: readFileSync(elsewhere, "utf8"),
      mode: "0600",
    } as never);
    const written = await node.apply(declared);
    expect(detail(written)).toContain(
      "wg0's configuration kept: /etc/wireguard/wg0.conf is a path the mesh writes",
    );
    expect(existsSync(conf)).toBe(true);
  });

  it("wg not answering keeps the found configuration and says why, in the plan and the report (issue 27, item 18)", async () => {
    await found();
    const node = freshOverlayNode(hub, hubKey);
    expect((await node.apply(takes())).exit).toBe(0);
    const conf = join(hub.root, "etc/wireguard/wg0.conf");
    const wg = join(hub.root, "usr/bin/wg");
    const real = readFileSync(wg);
    // a wg that cannot say anything: no handshake can be proven, so nothing may be retired
    writeFileSync(wg, "#!/bin/sh\necho 'Unable to access interface: Protocol error' >&2\nexit 1\n", {
      mode: 0o755,
    });
    try {
      const kept =
        /wg0's configuration kept: wg does not answer \(wg show mesh0 did not answer: Unable to access interface: Protocol error\)/;
      const plan = await node.apply(takes(), { dryRun: true });
      expect(plan.plan[0]?.detail).toMatch(kept);
      const r = await node.apply(takes());
      expect(detail(r)).toMatch(kept);
      expect(existsSync(conf)).toBe(true);
    } finally {
      writeFileSync(wg, real, { mode: 0o755 });
    }
  });

  it("retirement removes only <wireguard dir>/<if>.conf: a takeover record naming another path (a tampered state) removes nothing (issue 27, item 18)", async () => {
    await found();
    const stateDir = tempDir("mesh-wg-state-");
    const node = overlayNode(hub, stateDir, hubKey);
    expect((await node.apply(takes())).exit).toBe(0);
    // whoever holds the state directory points the takeover at a file the machine needs
    const precious = join(hub.root, "etc/precious");
    writeFileSync(precious, "keep me\n");
    const recordsFile = join(stateDir, "records.json");
    const records = JSON.parse(readFileSync(recordsFile, "utf8"));
    records.records.overlay.takeover.path = "/etc/precious";
    writeFileSync(recordsFile, JSON.stringify(records));
    const r = await node.apply(takes());
    expect(detail(r)).toContain(
      "wg0's configuration kept: /etc/precious is not /etc/wireguard/<interface>.conf",
    );
    expect(readFileSync(precious, "utf8")).toBe("keep me\n");
    expect(existsSync(join(hub.root, "etc/wireguard/wg0.conf"))).toBe(true);
  });

  it("a mesh unit that fails to start puts wg-quick@wg0 back, enabled and active, and the spoke still pings", async () => {
    await found();
    const before = readFileSync(join(hub.root, "etc/wireguard/wg0.conf"));
    const node = freshOverlayNode(hub, hubKey);
    await hub.must("ip", "link", "add", "mesh0", "type", "veth", "peer", "name", "mesh0p");
    const failed = await node.apply(takes());
    expect(failed.exit).toBe(1);
    expect(detail(failed)).toContain("takeover of wg0: not taken");
    expect(detail(failed)).toContain("wg0 started again");
    expect(await unitState(hub, "wg-quick@wg0")).toEqual({ active: "active", enabled: "enabled" });
    expect(await unitState(hub, "wg-quick@mesh0")).toMatchObject({ enabled: "disabled" });
    expect(readFileSync(join(hub.root, "etc/wireguard/wg0.conf"))).toEqual(before);
    expect(await pings(spoke, "10.78.0.1")).toBe(true);
  });

  it("an interface raised by hand, not by its unit, is looked at again and refused naming `wg-quick down`, nothing stopped", async () => {
    await found("by hand");
    const node = freshOverlayNode(hub, hubKey);
    const r = await node.apply(takes());
    expect(r.exit).toBe(2);
    expect(r.report.refusals[0]?.reason).toContain("wg0 is up but not by wg-quick@wg0 (raised by hand)");
    expect(r.report.refusals[0]?.reason).toContain("`wg-quick down wg0`");
    expect(await isUp(hub, "wg0")).toBe(true);
    expect(await isUp(hub, "mesh0")).toBe(false);
    expect(await pings(spoke, "10.78.0.1")).toBe(true);
  });

  it("an interface still up after its unit stopped refuses the takeover rather than half-working; the unit is enabled again", async () => {
    await found();
    // a unit whose stop leaves the interface up (its wireguard-go not killed), as one that did not raise it would
    const dropIn = join(hub.root, "etc/systemd/system/wg-quick@wg0.service.d");
    mkdirSync(dropIn, { recursive: true });
    writeFileSync(join(dropIn, "stop.conf"), "[Service]\nExecStop=\nExecStop=/bin/true\nKillMode=none\n");
    await hub.must("systemctl", "daemon-reload");
    const node = freshOverlayNode(hub, hubKey);
    const r = await node.apply(takes());
    expect(r.exit).toBe(1);
    expect(detail(r)).toContain("takeover of wg0: not taken");
    expect(detail(r)).toContain(
      "wg0 is still up after wg-quick@wg0 stopped, so it was raised by hand: `wg-quick down wg0`",
    );
    expect(await unitState(hub, "wg-quick@wg0")).toMatchObject({ enabled: "enabled" });
    expect(await isUp(hub, "mesh0")).toBe(false);
    expect(await pings(spoke, "10.78.0.1")).toBe(true);
  });
});
