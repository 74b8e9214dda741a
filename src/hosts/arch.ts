// The Arch host's own appliers beyond the portable floor (service, package, process).
import type { Applier } from "../appliers/types.ts";

export function archAppliers(): Applier[] {
  return [];
}
