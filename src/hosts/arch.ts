// The Arch host's own appliers beyond the portable floor: systemd, pacman, processes, containers, the overlay.
import {
  overlayApplier,
  packageApplier,
  processApplier,
  runtimeAppliers,
  serviceApplier,
} from "../appliers/arch/index.ts";
import type { Applier } from "../appliers/index.ts";

export function archAppliers(): Applier[] {
  return [serviceApplier, packageApplier, processApplier, ...runtimeAppliers(), overlayApplier];
}
