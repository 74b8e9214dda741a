// appliers/arch: the Arch host's appliers beyond the portable floor — service (systemd, and giving a unit back
// as found: give-back.ts), package (pacman), process, `containers/`, `overlay/`. Drivers are src/system/arch.
// The Android build leaves this folder out (android/bundle.mjs).
export * from "./containers/index.ts";
export type { GiveBack, ServiceFound, ServiceRecord } from "./give-back.ts";
export * from "./overlay/index.ts";
export { packageApplier } from "./package.ts";
export { processApplier } from "./process.ts";
export { serviceApplier } from "./service.ts";
