// The mesh directory's writes. It needs no lock: what several commands change at once (the nodes, codes and
// serials) is on the bus, changed by compare-and-set (state.ts). This layer imports nothing of the host's (a test
// proves it); the atomic write is the durable layer's (src/durable/).

import { MESH_FILE_MODE } from "../defaults.ts";
import { writeFileAtomicSync } from "../durable/index.ts";

/** The old file or the new, never half (src/durable/); the mesh directory's files are the operator's alone. */
export function writeAtomic(path: string, data: string | Uint8Array, mode = MESH_FILE_MODE): void {
  writeFileAtomicSync(path, data, mode);
}

export { fsyncDirSync as syncDir } from "../durable/index.ts";

/** Whether `pid` is a live process (a server's pid file read back). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}
