// appliers/arch: the Arch host's appliers beyond the portable floor — service (systemd, and giving a unit back
// as found: give-back.ts), package (pacman), process, `containers/`, `overlay/`. Drivers are src/system/arch.
// The Android executable never names this folder (its root is src/cli/main-android.ts). The Arch host's list is
// here: a new Arch type is its kind, its applier file and a line below; the Linux executable's root
// (src/cli/main.ts) hands the list in as it is.
import { registered } from "../dispatch.ts";
import type { ApplierList } from "../types.ts";
import { runtimeAppliers } from "./containers/index.ts";
import { overlayApplier } from "./overlay/index.ts";
import { packageApplier } from "./package.ts";
import { processApplier } from "./process.ts";
import { serviceApplier } from "./service.ts";

export {
  containerApplier,
  imageApplier,
  networkApplier,
  runtimeAppliers,
  volumeApplier,
} from "./containers/index.ts";
export type { GiveBack, ServiceFound, ServiceRecord } from "./give-back.ts";
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
} from "./overlay/index.ts";
export { packageApplier, processApplier, serviceApplier };

/** The Arch host's own appliers, each under its type: systemd, pacman, processes, containers, the overlay. */
export function archAppliers(): ApplierList {
  return {
    service: registered(serviceApplier),
    package: registered(packageApplier),
    process: registered(processApplier),
    ...runtimeAppliers(),
    overlay: registered(overlayApplier),
  };
}
