// Sealed values are opened with the node's sealing key, only to be written where they are declared.
import type { Unseal } from "../apply/index.ts";
import { loadKeys, type State, unseal } from "../store/index.ts";

/** Keys are read only when a declaration names a secret, and never leave this closure. */
export function unsealerFor(state: State): Unseal {
  return (sealed) => {
    const keys = loadKeys(state.dir);
    if (!keys.ok)
      return { ok: false, reason: "cannot be unsealed: this node has no sealing key (enrol it first)" };
    return unseal(sealed, keys.keys.sealing.privateKey);
  };
}
