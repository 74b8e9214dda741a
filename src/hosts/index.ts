// hosts: the per-OS set of appliers (the portable floor for every host, and the family an executable's
// composition root hands in for Arch), and the reason each host gives for the types it does not implement.
// Which host this machine is: src/host-kind.ts.

import type { ApplierList, Registered } from "../appliers/index.ts";
import { PORTABLE_APPLIERS } from "../appliers/portable/index.ts";
import type { HostKind } from "../host-kind.ts";
import type { TypeSupport } from "../vocabulary/index.ts";

export { hostFacts } from "./facts.ts";

export interface Host {
  kind: HostKind;
  appliers: ReadonlyMap<string, Registered>;
  support: TypeSupport;
}

const REASONS: Record<HostKind, string> = {
  arch: "not implemented on the Arch host",
  android: "not on an Android host",
  linux: "no applier for this OS",
};

/**
 * The host's appliers by type, from its list: each registered under its own type (the compiler checked it
 * against its kind there), and every lookup is by a resource's, record's or step's type.
 */
export function appliersOf(list: ApplierList): ReadonlyMap<string, Registered> {
  const appliers: (Registered | undefined)[] = Object.values(list);
  return new Map(appliers.flatMap((a) => (a ? [[a.type, a] as const] : [])));
}

/**
 * The host for a machine of `kind`: the portable floor, and on Arch the family's appliers the executable's
 * composition root hands in (`family`: none in the Android executable, which carries no Arch code).
 */
export function makeHost(kind: HostKind, family: ApplierList = {}): Host {
  const appliers = appliersOf(kind === "arch" ? { ...PORTABLE_APPLIERS, ...family } : PORTABLE_APPLIERS);
  return { kind, appliers, support: { supports: (type) => appliers.has(type), reason: REASONS[kind] } };
}
