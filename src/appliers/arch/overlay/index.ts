// appliers/arch/overlay: the WireGuard overlay — the applier (overlay.ts), what it surveys on the machine, a
// found tunnel taken over and its ledger, and a retired one given back. WireGuard itself is src/system/arch.
export {
  accountLine,
  facts,
  meshInterfaces,
  type OverlayPorts,
  OverlayRecord,
  overlayApplier,
  overlayKeyOf,
  retiredTunnels,
  type Takeover,
  takeovers,
} from "./overlay.ts";
