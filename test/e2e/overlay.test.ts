// The overlay end to end against a real bus: a machine with a found tunnel enrols (its key taken, never printed
// or sent; the tunnel in the question), the mesh double composes from it and declares the takeover, the node held
// in its mesh applies it, the spoke pings through the mesh's interface, and the drift check retires the found
// configuration once a peer has handshaken. And `overlay take --tunnel`: told first, written second, idempotent.
//
// Each command runs inside the machine's mount namespace (its /run/wireguard and /etc/wireguard) and on this
// machine's network, where the bus is; what the applier runs goes through the machine's own command port.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openBound, verifyRekey } from "../../src/link/index.ts";
import { RunLoop } from "../../src/run/index.ts";
import {
  loadIdentity,
  loadKeys,
  Outbox,
  OverlayState,
  publicB64,
  State,
  StoreOriginals,
} from "../../src/store/index.ts";
import { MeshDouble } from "../mesh/index.ts";
import { cliCommand } from "../support/cli.ts";
import { hubTunnel, spokeTunnel } from "../support/overlay-pair.ts";
import { hostExec } from "../support/systemd.ts";
import { tempDir } from "../support/tmp.ts";
import {
  type Machine,
  netnsMachine,
  overlayHost,
  pings,
  plantTunnel,
  type WgKey,
  wgKey,
  wire,
} from "../support/wireguard.ts";

let mesh: MeshDouble;
beforeAll(async () => {
  mesh = await MeshDouble.start();
});
afterAll(async () => {
  await mesh?.stop();
});
const machines: Machine[] = [];
afterEach(async () => {
  await Promise.all(machines.splice(0).map((m) => m.stop()));
});

/** mesh-host as a person runs it on that machine: in its mount namespace, on this machine's network. */
async function cli(m: Machine, ...args: string[]) {
  return hostExec.run(["nsenter", "-t", String(m.pid), "-m", "--", ...cliCommand(), ...args], {
    timeoutMs: 60_000,
    env: { MESH_LOG: "info", HOME: process.env.HOME ?? "/root" },
  });
}

interface Pair {
  hub: Machine;
  spoke: Machine;
  hubKey: WgKey;
  spokeKey: WgKey;
  under: { a: string; b: string };
}

async function pair(): Promise<Pair> {
  const [hub, spoke] = await Promise.all([netnsMachine(), netnsMachine()]);
  machines.push(hub, spoke);
  const under = await wire(hub, spoke, 3);
  const [hubKey, spokeKey] = [wgKey(), wgKey()];
  await plantTunnel(spoke, "wg0", spokeTunnel(spokeKey, hubKey, under.a));
  return { hub, spoke, hubKey, spokeKey, under };
}

const plantHub = (p: Pair) => plantTunnel(p.hub, "wg0", hubTunnel(p.hubKey, p.spokeKey));

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** The node held in its mesh in this process, its appliers reaching the machine through its command port. */
function runLoop(m: Machine, stateDir: string, node: string): RunLoop {
  const state = new State(stateDir);
  const membership = state.readMembership()!;
  const identity = loadIdentity(stateDir);
  if (!identity.ok) throw new Error(identity.reason);
  const dial = () => openBound(membership, node, identity.pair.privateKey);
  const ports = { root: m.root, exec: m.exec, rootless: false, log: quiet, overlay: new OverlayState(state) };
  return new RunLoop({
    deps: {
      state,
      originals: new StoreOriginals(state),
      outbox: new Outbox(state),
      host: overlayHost(),
      ports,
      unseal: () => ({ ok: false, reason: "no secrets here" }),
      node,
      membership,
    },
    dial,
    log: quiet,
    heartbeatS: 30,
    redialSpreadS: 1,
    driftS: 1,
  });
}

describe("overlay through the mesh", () => {
  it("enrols taking the found tunnel's key (never printed or sent), is declared the takeover, and retires the found config after a handshake", async () => {
    const p = await pair();
    await plantHub(p);
    const node = "ovl-hub";
    const state = join(tempDir("mesh-wg-e2e-"), "state");
    const { code } = await mesh.enrolmentCode(node);
    const enrolled = await cli(p.hub, "enrol", code, "--state", state, "--root", "/", "--host", "arch");
    expect(enrolled.code, enrolled.stderr).toBe(0);
    expect(enrolled.stdout).toContain(
      "took the overlay key of WireGuard interface wg0 (10.78.0.1; port 51820, range 10.78.0.0/24, 1 peer(s), MTU 1380)",
    );
    expect(`${enrolled.stdout}${enrolled.stderr}`).not.toContain(p.hubKey.private);
    const seen = mesh.enrolments.find((e) => e.question?.node === node)!;
    expect(seen.question?.tunnel).toEqual({
      interface: "wg0",
      port: 51820,
      address: "10.78.0.1",
      range: "10.78.0.0/24",
      peers: 1,
      mtu: 1380,
    });
    expect(seen.question?.keys.overlay).toBe(p.hubKey.public);
    expect(JSON.stringify(seen.question)).not.toContain(p.hubKey.private);
    expect(readFileSync(join(state, "identity/overlay.key"), "utf8").trim()).toBe(p.hubKey.private);

    // the mesh composes from the tunnel it was told of
    const t = seen.question!.tunnel!;
    const overlay = {
      id: "overlay",
      type: "overlay",
      interface: "mesh0",
      address: `${t.address}/${t.range.split("/")[1]}`,
      listen_port: t.port,
      ...(t.mtu ? { mtu: t.mtu } : {}),
      peers: [
        {
          public_key: p.spokeKey.public,
          allowed_ips: ["10.78.0.2/32"],
          endpoint: `${p.under.b}:51821`,
          keepalive_s: 25,
        },
      ],
      takes: t.interface,
    };
    const h = runLoop(p.hub, state, node);
    const running = h.run();
    try {
      await mesh.declare(node, { v: 1, node, mode: "adopted", resources: [overlay] });
      const first = await mesh.awaitReport(1, { node });
      expect(first.value?.outcome, JSON.stringify(first.value)).toBe("applied");
      expect(first.value?.steps[0]?.detail).toContain(
        "takeover of wg0: taken (port 51820, range 10.78.0.0/24, 1 peer(s), MTU 1380",
      );
      expect(first.value?.holds.map((x) => x.path)).toEqual(["/etc/wireguard/wg0.conf"]);
      expect(await pings(p.spoke, "10.78.0.1")).toBe(true);
      // the drift check finds the handshake and retires the found configuration: a report, since it changed
      const second = await mesh.awaitReport(2, { node });
      expect(second.value?.steps[0]?.detail).toContain("wg0's configuration retired");
      expect(second.value?.holds).toEqual([]);
    } finally {
      h.stop();
      await running;
    }
  });

  it("overlay take --tunnel: the mesh told first (a signed rekey), the key written second, and a run again is idempotent", async () => {
    const p = await pair();
    const node = "ovl-take";
    const state = join(tempDir("mesh-wg-e2e-"), "state");
    const { code } = await mesh.enrolmentCode(node);
    // enrolled before the tunnel was there: the mesh knows a minted overlay key
    const enrolled = await cli(p.hub, "enrol", code, "--state", state, "--root", "/", "--host", "arch");
    expect(enrolled.code, enrolled.stderr).toBe(0);
    const keysBefore = loadKeys(state);
    if (!keysBefore.ok) throw new Error(keysBefore.reason);
    const minted = publicB64(keysBefore.keys.overlay.publicKey);
    await plantHub(p);

    // the bus away: not told, so nothing written
    const keyFile = readFileSync(join(state, "identity/overlay.key"));
    await mesh.stopServer();
    const away = await cli(p.hub, "overlay", "take", "--tunnel", "wg0", "--state", state, "--root", "/");
    await mesh.startServer();
    expect(away.code).toBe(1);
    expect(away.stderr).toContain("the mesh was not told");
    expect(away.stderr).toContain("nothing was written");
    expect(readFileSync(join(state, "identity/overlay.key"))).toEqual(keyFile);

    const took = await cli(p.hub, "overlay", "take", "--tunnel", "wg0", "--state", state, "--root", "/");
    expect(took.code, took.stderr).toBe(0);
    expect(took.stdout).toContain("took wg0's key as this node's overlay key");
    expect(`${took.stdout}${took.stderr}`).not.toContain(p.hubKey.private);
    const after = loadKeys(state);
    if (!after.ok) throw new Error(after.reason);
    expect(publicB64(after.keys.overlay.publicKey)).toBe(p.hubKey.public);
    // identity and sealing untouched: nothing sealed to the node is remade
    expect(publicB64(after.keys.identity.publicKey)).toBe(publicB64(keysBefore.keys.identity.publicKey));
    expect(publicB64(after.keys.sealing.publicKey)).toBe(publicB64(keysBefore.keys.sealing.publicKey));

    const msg = await mesh.jsm.streams.getMessage("REKEY", { last_by_subj: `mesh.rekey.${node}` });
    const json = JSON.parse(Buffer.from(msg!.data).toString("utf8"));
    const verified = verifyRekey(msg!.data, node, publicB64(after.keys.identity.publicKey));
    expect(verified.ok, verified.ok ? "" : verified.reason).toBe(true);
    expect(json).toMatchObject({ v: 2, sig: expect.any(String) });
    expect(JSON.parse(json.body)).toMatchObject({
      v: 1,
      node,
      left: minted,
      taken: p.hubKey.public,
      tunnel: {
        interface: "wg0",
        port: 51820,
        address: "10.78.0.1",
        range: "10.78.0.0/24",
        peers: 1,
        mtu: 1380,
      },
    });
    // a changed message no longer verifies
    const changed = { ...json, body: JSON.stringify({ ...JSON.parse(json.body), taken: minted }) };
    const changedBytes = new TextEncoder().encode(JSON.stringify(changed));
    expect(verifyRekey(changedBytes, node, publicB64(after.keys.identity.publicKey)).ok).toBe(false);

    // again: the same message told again (one message to the stream), nothing else changed
    const again = await cli(p.hub, "overlay", "take", "--tunnel", "wg0", "--state", state, "--root", "/");
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("already this node's overlay key; the mesh was told again");
    const info = await mesh.jsm.streams.info("REKEY", { subjects_filter: `mesh.rekey.${node}` });
    expect(info.state.subjects?.[`mesh.rekey.${node}`]).toBe(1);
  });
});
