// The overlay tests' two machines, set up once here: a hub whose found tunnel wg0 is 10.78.0.1/24 on 51820 at MTU
// 1380 with the spoke its one peer, and a spoke whose wg0 (10.78.0.2/24 on 51821) dials the hub across the wire
// between them; and a node of the mesh on a machine, with a state directory of its own.
import { tempDir } from "./tmp.ts";
import { type Machine, type OverlayNode, overlayNode, type TunnelSpec, type WgKey } from "./wireguard.ts";

/** The hub's found tunnel: 10.78.0.1/24 on 51820 at MTU 1380, the spoke its one peer. */
export function hubTunnel(hubKey: WgKey, spokeKey: WgKey): TunnelSpec {
  return {
    key: hubKey,
    address: "10.78.0.1/24",
    port: 51820,
    mtu: 1380,
    peers: [{ key: spokeKey.public, allowed: "10.78.0.2/32" }],
  };
}

/** The spoke's tunnel: 10.78.0.2/24 on 51821, dialling the hub at `hubUnder` (its end of the wire), port 51820. */
export function spokeTunnel(spokeKey: WgKey, hubKey: WgKey, hubUnder: string): TunnelSpec {
  return {
    key: spokeKey,
    address: "10.78.0.2/24",
    port: 51821,
    peers: [{ key: hubKey.public, allowed: "10.78.0.1/32", endpoint: `${hubUnder}:51820` }],
  };
}

/** A node on `m` with a state directory of its own, its overlay key `key` (as enrolment leaves it). */
export const freshOverlayNode = (m: Machine, key?: WgKey): OverlayNode =>
  overlayNode(m, tempDir("mesh-wg-state-"), key);
