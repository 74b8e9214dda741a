// What the overlay remembers across runs is kept by the store (store/overlay.ts: the takeover journal, the
// retirement ledger and the originals it keeps): read and written here through the port the host gives, none
// when it gave no state directory.

import type { OverlayState, Retired, Takeover } from "../../../store/index.ts";

export { type Retired, Takeover } from "../../../store/index.ts";

/** The takeover account (overlay.md): given on every takeover, failures included. */
export type Account = Takeover["state"];

/** How a unit (or, without systemd, an interface) was found: what giving it back restores. */
export type FoundRun = Takeover["found"];

/** Every found tunnel whose configuration the mesh retired, by interface: what status shows and a take consults. */
export function retiredTunnels(overlay: OverlayState | undefined): Record<string, Retired> {
  return overlay?.retired() ?? {};
}

/** Every takeover's last account, by the found interface's name. */
export function takeovers(overlay: OverlayState | undefined): Record<string, Takeover> {
  return overlay?.takeovers() ?? {};
}

export function noteTakeover(
  overlay: OverlayState | undefined,
  t: Takeover | { interface: string; forget: true },
): void {
  overlay?.noteTakeover(t);
}
