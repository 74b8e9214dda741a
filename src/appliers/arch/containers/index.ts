// appliers/arch/containers: container, image, network and volume over one runtime port (src/system/arch/
// runtime.ts), sharing what one apply asked the runtime (session.ts) and how made objects are given back.
export { runtimeAppliers } from "./container.ts";
export { imageApplier } from "./image.ts";
export { networkApplier } from "./network.ts";
export { volumeApplier } from "./volume.ts";
