// One mesh double for a whole e2e test file that drives the built executable.
import { afterAll, beforeAll } from "vitest";
import { MeshDouble } from "../mesh/index.ts";
import { ensureSea } from "./sea.ts";

/**
 * Before the file's tests: the SEA built (once, and named in MESH_HOST_BIN unless the run names one) and a
 * mesh double started, handed to `use`; after them, the double stopped.
 */
export function meshForFile(use: (mesh: MeshDouble) => void): void {
  let mesh: MeshDouble | undefined;
  beforeAll(async () => {
    process.env.MESH_HOST_BIN ??= ensureSea();
    mesh = await MeshDouble.start();
    use(mesh);
  }, 600_000);
  afterAll(async () => {
    await mesh?.stop();
  });
}
