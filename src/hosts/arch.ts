// The Arch host's own appliers beyond the portable floor: their list is the Arch appliers' own
// (src/appliers/arch/index.ts), taken as it is. android/bundle.mjs swaps this file for floor-only.ts.
export { archAppliers } from "../appliers/arch/index.ts";
