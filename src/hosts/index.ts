// hosts: the per-OS set of appliers (the Arch host's, the portable floor for Android and any other Linux), and
// the reason each host gives for the types it does not implement. Which host this machine is: kind.ts.

import type { Applier } from "../appliers/index.ts";
import { actionApplier, directoryApplier, fileApplier } from "../appliers/portable/index.ts";
import type { TypeSupport } from "../vocabulary/index.ts";
import { archAppliers } from "./arch.ts";

import type { HostKind } from "./kind.ts";

export { detectHostKind, HOST_KINDS, type HostKind } from "./kind.ts";

export interface Host {
  kind: HostKind;
  appliers: ReadonlyMap<string, Applier>;
  support: TypeSupport;
}

const floor: Applier[] = [fileApplier, directoryApplier, actionApplier];

const REASONS: Record<HostKind, string> = {
  arch: "not implemented on the Arch host",
  android: "not on an Android host",
  linux: "no applier for this OS",
};

export function makeHost(kind: HostKind): Host {
  const list = kind === "arch" ? [...floor, ...archAppliers()] : floor;
  const appliers = new Map<string, Applier>(list.map((a) => [a.type, a]));
  return { kind, appliers, support: { supports: (type) => appliers.has(type), reason: REASONS[kind] } };
}
