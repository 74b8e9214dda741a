// pacman, reached only through the command port: what is installed, and pacman's own words when it refuses.
import { PACMAN_CHANGE_TIMEOUT_MS, PACMAN_QUERY_TIMEOUT_MS } from "../../defaults.ts";
import { oneLine } from "../../vocabulary/index.ts";
import type { Exec, ExecResult } from "../exec.ts";

/** pacman's words are parsed: keep them in one language. */
const C_LOCALE = { LC_ALL: "C" };

// named in src/defaults.ts with every other timeout; said here too, so the driver's surface is unchanged
export { PACMAN_CHANGE_TIMEOUT_MS } from "../../defaults.ts";

export interface Installed {
  name: string;
  version: string;
}

/** `pacman …args` with the locale pinned and a timeout. */
export function pacman(exec: Exec, args: string[], timeoutMs = PACMAN_QUERY_TIMEOUT_MS): Promise<ExecResult> {
  return exec.run(["pacman", ...args], { env: C_LOCALE, timeoutMs });
}

/** The installed package called exactly `name` (`pacman -Q`), null when none is, or why pacman could not say. */
export async function queryPackage(exec: Exec, name: string): Promise<Installed | null | string> {
  const r = await pacman(exec, ["-Q", "--", name]);
  if (r.code === 0) {
    const [got, version] = r.stdout.trim().split(/\s+/);
    if (got === name && version) return { name, version };
    return `pacman -Q ${name} said "${oneLine(r.stdout)}"`;
  }
  if (r.code === 1 && /was not found/.test(r.stderr)) return null;
  return `pacman -Q ${name}: ${pacmanError(r)}`;
}

/** Progress lines and questions pacman prints on stdout that say nothing about why it failed. */
const CHATTER = /^:: (Proceed|Do you want|Retrieving|Processing|Synchronizing|Running|Starting)/;

/**
 * What pacman said went wrong, in its own words: its `error:`/`warning:` lines, and the `::` lines that
 * explain them (a broken dependency is said on stdout, its error on stderr).
 */
export function pacmanError(r: ExecResult): string {
  if (r.spawnError) return `could not start pacman: ${r.spawnError}`;
  if (r.timedOut) return "pacman timed out";
  const lines = [
    ...r.stderr.split("\n"),
    ...r.stdout.split("\n").filter((l) => l.startsWith(":: ") && !CHATTER.test(l)),
  ]
    .map((l) => l.trim())
    .filter(Boolean);
  const how = r.code === null ? `killed by ${r.signal}` : `exit ${r.code}`;
  return lines.length ? `${oneLine(lines.join("; "))} (${how})` : how;
}

/** pacman's error lines even when it exited 0 (it does when an install scriptlet fails). */
export function errorLines(r: ExecResult): string[] {
  return r.stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("error:"));
}

/**
 * Whether `installed` is the declared exact `version`. A declared version without a release (`1.2`) names
 * every release of it, as pacman's own `name=1.2` does; an epoch must match when either side has one.
 */
export function versionMatches(installed: string, version: string): boolean {
  if (installed === version) return true;
  if (version.includes("-")) return false;
  const cut = installed.lastIndexOf("-");
  return cut > 0 && installed.slice(0, cut) === version;
}

/** What `pacman -S` is asked for: the name, or `name=version` (pacman then takes only that version). */
export const syncTarget = (name: string, version?: string): string => (version ? `${name}=${version}` : name);

/** `pacman -U` of a package file (a release of mesh-host): null when installed, else pacman's own words. */
export async function installPackageFile(exec: Exec, file: string): Promise<string | null> {
  const r = await pacman(exec, ["-U", "--noconfirm", "--", file], PACMAN_CHANGE_TIMEOUT_MS);
  return r.code === 0 ? null : pacmanError(r);
}
