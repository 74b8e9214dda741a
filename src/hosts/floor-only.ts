// The Android build's stand-in for arch.ts (android/bundle.mjs swaps it in): the same export, no appliers, so
// nothing of systemd, pacman, processes, containers or the overlay is bundled. The portable floor (file,
// directory, action) comes from index.ts itself, as on every host.
import type { ApplierList } from "../appliers/index.ts";

export function archAppliers(): ApplierList {
  return {};
}
