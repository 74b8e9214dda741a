// The per-OS set of appliers, and the reason each host gives for the types it does not implement.
import { existsSync, readFileSync } from "node:fs";
import { actionApplier, directoryApplier, fileApplier } from "../appliers/index.ts";
import type { Applier } from "../appliers/types.ts";
import type { TypeSupport } from "../vocabulary/index.ts";
import { archAppliers } from "./arch.ts";

export type HostKind = "arch" | "android" | "linux";
export const HOST_KINDS: readonly HostKind[] = ["arch", "android", "linux"];

export interface Host {
  kind: HostKind;
  appliers: ReadonlyMap<string, Applier>;
  support: TypeSupport;
}

const floor: Applier[] = [fileApplier, directoryApplier, actionApplier] as unknown as Applier[];

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

/** Which host this machine is: Android by its runtime's marks, Arch by os-release, any other Linux otherwise. */
export function detectHostKind(
  env: NodeJS.ProcessEnv = process.env,
  osRelease = "/etc/os-release",
): HostKind {
  if (env.ANDROID_ROOT || existsSync("/system/build.prop")) return "android";
  try {
    const text = readFileSync(osRelease, "utf8");
    if (/^ID=("?)arch\1$/m.test(text) || /^ID_LIKE=.*\barch\b/m.test(text)) return "arch";
  } catch {
    // no os-release: a plain Linux
  }
  return "linux";
}
