// Sealed values are opened with the node's sealing key, only to be written where they are declared.
import type { Unseal } from "../apply/index.ts";
import type { State } from "../store/index.ts";

export function unsealerFor(_state: State): Unseal {
  return () => ({ ok: false, reason: "cannot be unsealed: this node has no sealing key (enrol it first)" });
}
