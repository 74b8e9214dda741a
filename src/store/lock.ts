// The state lock, for every command that changes the machine: the durable layer's pid+start-time lock on the
// state directory's `lock` file.
import { join } from "node:path";
import { LOCK_WAIT_MS } from "../defaults.ts";
import { type Lock, LockRefused, takeLock } from "../durable/index.ts";
import { StateError } from "./state.ts";

export { type Lock, LockBusy, startTimeOf } from "../durable/index.ts";

/** Take the state lock, waiting up to `waitMs` for a live holder to finish. */
export async function acquireLock(stateDir: string, waitMs = LOCK_WAIT_MS): Promise<Lock> {
  try {
    return await takeLock(join(stateDir, "lock"), waitMs);
  } catch (e) {
    // a link planted at the lock path: the state directory is not as this host left it
    throw e instanceof LockRefused ? new StateError(e.message) : e;
  }
}
