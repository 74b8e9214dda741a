// What the applier of a type says of its resources, steps and records (its traits), looked up by type: the
// one place src/apply/ asks, so the decider, the journal and the executor name no type and ask alike.
import type { RecordBase, Step, Traits } from "../appliers/index.ts";
import type { Host } from "../hosts/index.ts";
import type { Records } from "../store/index.ts";
import type { Resource } from "../vocabulary/index.ts";

/** What the applier of `type` says of its resources, steps and records: nothing where the host has none. */
export function traitsOf(host: Host, type: string): Traits<Resource, RecordBase, Step> {
  return host.appliers.get(type)?.traits ?? {};
}

/**
 * What looks at what changed (or was written) before it is reached is decided in order, and again when the
 * apply reaches it; everything else side by side. The applier says which of its resources do.
 */
export const readsChanges = (host: Host, r: Resource): boolean =>
  traitsOf(host, r.type).readsChanges?.(r) ?? false;

/** The path a record names, as its applier reads it; undefined for a record that names none. */
export const recordPath = (host: Host, record: RecordBase): string | undefined =>
  traitsOf(host, record.type).pathOf?.(record);

/** The digest the records say the host last wrote at `path`, as they stand. */
export function wroteIn(host: Host, records: Records, path: string): string | undefined {
  for (const r of Object.values(records)) {
    const wrote = traitsOf(host, r.type).wrote?.(r);
    if (wrote && recordPath(host, r) === path) return wrote;
  }
  return undefined;
}

/** Who claims each recorded path: a path moving from one id to another is still the mesh's, never "found". */
export function claimsOf(host: Host, records: Records): Map<string, { id: string; record: Records[string] }> {
  const claims = new Map<string, { id: string; record: Records[string] }>();
  for (const [id, record] of Object.entries(records)) {
    const path = recordPath(host, record);
    if (path !== undefined) claims.set(path, { id, record });
  }
  return claims;
}
