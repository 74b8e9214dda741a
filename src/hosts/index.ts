// The per-OS set of appliers, and the reason each host gives for the types it does not implement.
import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
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

/** Where Android keeps its build properties: present on every Android system image. */
const ANDROID_BUILD_PROP = "/system/build.prop";
/** `getprop` is asked only when one is on PATH, and never for longer than this. */
const GETPROP_TIMEOUT_MS = 1_000;

/**
 * Which host this machine is: Android by its runtime's marks, Arch by os-release, any other Linux otherwise.
 * It runs on every start, so the cheap marks come first (an environment variable, one stat) and `getprop` is
 * spawned only when one is on PATH: a plain Linux spawns nothing.
 */
export function detectHostKind(
  env: NodeJS.ProcessEnv = process.env,
  osRelease = "/etc/os-release",
  buildProp = ANDROID_BUILD_PROP,
): HostKind {
  if (env.ANDROID_ROOT || existsSync(buildProp) || getpropAnswers(env)) return "android";
  try {
    const text = readFileSync(osRelease, "utf8");
    if (/^ID=("?)arch\1$/m.test(text) || /^ID_LIKE=.*\barch\b/m.test(text)) return "arch";
  } catch {
    // no os-release: a plain Linux
  }
  return "linux";
}

/** A `getprop` on PATH that answers `ro.build.version.sdk` with an API level: only Android's does. */
function getpropAnswers(env: NodeJS.ProcessEnv): boolean {
  const getprop = onPath("getprop", env.PATH);
  if (!getprop) return false;
  const r = spawnSync(getprop, ["ro.build.version.sdk"], {
    encoding: "utf8",
    timeout: GETPROP_TIMEOUT_MS,
    stdio: ["ignore", "pipe", "ignore"],
    env,
  });
  return r.status === 0 && /^\d+$/.test(r.stdout.trim());
}

function onPath(name: string, path: string | undefined): string | null {
  for (const dir of (path ?? "").split(delimiter)) {
    if (!dir) continue;
    const file = join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}
