// appliers/arch/containers: container, image, network and volume over one runtime port (src/system/arch/
// runtime.ts), sharing what one apply asked the runtime (session.ts) and how made objects are given back.
// Their list is here: a new type over the runtime is its vocabulary, its applier file and a line below.
import { machineRuntimes, type RuntimeFinder } from "../../../system/arch/index.ts";
import { registered } from "../../dispatch.ts";
import type { ApplierList } from "../../types.ts";
import { containerApplier } from "./container.ts";
import { imageApplier } from "./image.ts";
import { networkApplier } from "./network.ts";
import { volumeApplier } from "./volume.ts";

export { containerApplier, imageApplier, networkApplier, volumeApplier };

/** The appliers over one runtime finder: the machine's own unless a test gives its daemons. */
export function runtimeAppliers(finder: RuntimeFinder = machineRuntimes()): ApplierList {
  return {
    image: registered(imageApplier(finder)),
    network: registered(networkApplier(finder)),
    volume: registered(volumeApplier(finder)),
    container: registered(containerApplier(finder)),
  };
}
