// The Arch host's own appliers beyond the portable floor: systemd, pacman, processes, containers, the overlay.
import { runtimeAppliers } from "../appliers/container.ts";
import { overlayApplier } from "../appliers/overlay.ts";
import { packageApplier } from "../appliers/package.ts";
import { processApplier } from "../appliers/process.ts";
import { serviceApplier } from "../appliers/service.ts";
import type { Applier } from "../appliers/types.ts";

export function archAppliers(): Applier[] {
  return [
    serviceApplier as unknown as Applier,
    packageApplier as unknown as Applier,
    processApplier as unknown as Applier,
    ...runtimeAppliers(),
    overlayApplier as unknown as Applier,
  ];
}
