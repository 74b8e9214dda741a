// A path another id recorded is the mesh's already: never "found" (its content would be held as an original and
// given back instead of removed).

import type { DecideContext } from "../types.ts";

/** What a file or a directory reads of another id's record of its path. */
export interface Claim {
  pending?: boolean;
  /** True when the mesh made what is there. */
  created: boolean;
  wrote?: string;
  mode?: string;
  found_mode?: string;
}

/**
 * Another id's record of `path`, each field read by its type: any resource that records a path counts (a
 * directory, or an overlay's configuration, moving to a file), so none is assumed to be of the reader's type.
 */
export function claimOf(ctx: DecideContext, path: string, id: string): Claim | undefined {
  const r = ctx.claimed?.(path, id);
  if (!r) return undefined;
  const text = (v: unknown) => (typeof v === "string" ? v : undefined);
  return {
    pending: r.pending,
    created: r.created === true,
    wrote: text(r.wrote),
    mode: text(r.mode),
    found_mode: text(r.found_mode),
  };
}
