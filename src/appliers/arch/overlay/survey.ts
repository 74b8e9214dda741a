// What the overlay's decide reads of the machine, read only: the node's overlay key from the state directory,
// the configuration at the interface's path and the one the mesh would write there, the live interface, its
// MTU and, where systemd runs, its wg-quick unit. A takeover reads the same, so both start from one survey.

import type { OverlayKey, OverlayState } from "../../../store/index.ts";
import {
  configPath,
  type FoundFile,
  hasSystemd,
  type Init,
  interfaceMtu,
  type Live,
  quickUnitState,
  readInterface,
  readRegular,
  renderConfig,
  type UnitState,
} from "../../../system/arch/index.ts";
import { placeProblem, sha256 } from "../../../system/index.ts";
import type { OverlayResource } from "../../../vocabulary/index.ts";
import type { DecideContext, Ports } from "../../types.ts";

/** The ports the overlay reads: the contract's, whose state directory holds the node's keys. */
export type OverlayPorts = Ports;

// ---- the node's overlay key

export type Key = OverlayKey;

/** The node's overlay key, from its state directory; a reason never quotes the file. */
export function overlayKeyOf(overlay: OverlayState | undefined): Key | string {
  if (!overlay) return "the node's overlay key cannot be read: this host gave the applier no state directory";
  return overlay.key();
}

// ---- what decide reads

export interface Survey {
  init: Init;
  key: Key;
  path: string;
  file: FoundFile | null;
  bytes: Uint8Array;
  sha: string;
  live: Live;
  mtu: number | null;
  unit: UnitState | null;
}

export const overlayStateOf = (ctx: DecideContext) => ctx.ports.overlay;
export const initOf = async (ctx: DecideContext): Promise<Init> => ({
  systemd: await hasSystemd(ctx.ports.exec),
  exec: ctx.ports.exec,
});
export const runner = (init: Init, iface: string) =>
  init.systemd ? `wg-quick@${iface}` : `wg-quick ${iface}`;

export async function survey(wanted: OverlayResource, ctx: DecideContext): Promise<Survey | string> {
  const key = overlayKeyOf(overlayStateOf(ctx));
  if (typeof key === "string") return key;
  const path = configPath(wanted.interface);
  const problem = placeProblem(ctx.ports.root, path);
  if (problem) return problem;
  const init = await initOf(ctx);
  const file = await readRegular(ctx.ports.root, path);
  if (typeof file === "string") return file;
  const bytes = Buffer.from(renderConfig(wanted, key.private), "utf8");
  const live = await readInterface(init.exec, wanted.interface);
  const mtu = live.kind === "up" ? await interfaceMtu(init.exec, wanted.interface) : null;
  const unit = init.systemd ? await quickUnitState(init, wanted.interface) : null;
  if (typeof unit === "string") return unit;
  return { init, key, path, file, bytes, sha: sha256(bytes), live, mtu, unit };
}
