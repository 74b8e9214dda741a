// Which host this machine is, and the kinds there are: apart from the appliers, so a command that needs only
// the kind (`version`, the flag check) starts without loading them.
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { GETPROP_TIMEOUT_MS } from "./defaults.ts";

/** The kinds there are: `--host` offers these, and a host is one of them. */
export const HOST_KINDS = ["arch", "android", "linux"] as const;
export type HostKind = (typeof HOST_KINDS)[number];

/** Where Android keeps its build properties: present on every Android system image. */
const ANDROID_BUILD_PROP = "/system/build.prop";

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
  // loaded here, not at the top: child_process brings net and dgram with it, and a plain Linux never spawns
  const { spawnSync } = process.getBuiltinModule("node:child_process") as typeof import("node:child_process");
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
