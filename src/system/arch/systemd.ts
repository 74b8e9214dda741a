// systemd, reached only through the command port: what a unit is now, unit files the mesh writes, and the
// few verbs the service and process appliers use. Nothing here pretends another init exists (docs/architecture.md, "What the init is asked for").
import {
  CALENDAR_CHECK_TIMEOUT_MS,
  DEFAULT_DIR_MODE,
  DEFAULT_FILE_MODE,
  SYSTEMCTL_TIMEOUT_MS,
} from "../../defaults.ts";
import { oneLine } from "../../vocabulary/index.ts";
import { sha256 } from "../digest.ts";
import type { Exec, ExecResult } from "../exec.ts";
import { readFileAt, removeFileAt, removeTreeAt, writeFileAt } from "../files.ts";
import { placeProblem } from "../paths.ts";

/** Where the mesh writes the unit files it owns or overrides: the administrator's directory, not the vendor's. */
export const UNIT_DIR = "/etc/systemd/system";
/** systemctl's words are parsed: keep them in one language. */
export const C_LOCALE = { LC_ALL: "C", SYSTEMD_PAGER: "", SYSTEMD_COLORS: "0" };

/** What `systemctl show` says of a unit. `load: "not-found"` is absence, never "stopped". */
export interface UnitState {
  load: string;
  active: string;
  sub: string;
  /** UnitFileState: enabled, disabled, static, masked, …; empty for a unit with no file. */
  file: string;
  /** The file on disk changed since systemd loaded it: anything read now would be the old unit. */
  needReload: boolean;
  invocation: string;
}

export const unitPath = (unit: string): string => `${UNIT_DIR}/${unit}`;

/** One line a person can act on from a failed command: its own words, or how it ended. */
export function failureText(r: ExecResult): string {
  if (r.spawnError) return `could not start: ${r.spawnError}`;
  if (r.timedOut) return "timed out";
  const said = oneLine(r.stderr) || oneLine(r.stdout);
  const how = r.code === null ? `killed by ${r.signal}` : `exit ${r.code}`;
  return said ? `${said} (${how})` : how;
}

/** `systemctl …args`; null when it succeeded, else why not. */
export async function systemctl(exec: Exec, ...args: string[]): Promise<string | null> {
  const r = await exec.run(["systemctl", ...args], { env: C_LOCALE, timeoutMs: SYSTEMCTL_TIMEOUT_MS });
  return r.code === 0 ? null : `systemctl ${args.join(" ")}: ${failureText(r)}`;
}

/** The unit as systemd has it loaded now, or why it could not be asked. */
export async function showUnit(exec: Exec, unit: string): Promise<UnitState | string> {
  const r = await exec.run(
    [
      "systemctl",
      "show",
      "-p",
      "LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload,InvocationID",
      "--",
      unit,
    ],
    { env: C_LOCALE, timeoutMs: SYSTEMCTL_TIMEOUT_MS },
  );
  if (r.code !== 0) return `systemctl show ${unit}: ${failureText(r)}`;
  const props = new Map<string, string>();
  for (const line of r.stdout.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) props.set(line.slice(0, eq), line.slice(eq + 1));
  }
  const load = props.get("LoadState");
  if (!load) return `systemctl show ${unit} gave no LoadState`;
  return {
    load,
    active: props.get("ActiveState") ?? "",
    sub: props.get("SubState") ?? "",
    file: props.get("UnitFileState") ?? "",
    needReload: props.get("NeedDaemonReload") === "yes",
    invocation: props.get("InvocationID") ?? "",
  };
}

export const isAbsent = (s: UnitState): boolean => s.load === "not-found";
export const isEnabled = (fileState: string): boolean =>
  fileState === "enabled" || fileState === "enabled-runtime";
/** Running, or on its way there: what `stopped` must undo and `running` need not start again. */
export const isActive = (activeState: string): boolean =>
  activeState === "active" || activeState === "activating" || activeState === "reloading";

/** Why systemd rejects `schedule` as a calendar expression, or null. Asked of systemd itself, where it runs. */
export async function calendarProblem(exec: Exec, schedule: string): Promise<string | null> {
  const r = await exec.run(["systemd-analyze", "calendar", "--", schedule], {
    env: C_LOCALE,
    timeoutMs: CALENDAR_CHECK_TIMEOUT_MS,
  });
  if (r.code === 0) return null;
  return `systemd rejects "${schedule}": ${failureText(r)}`;
}

/**
 * argv as one ExecStart= value: every word quoted, so spaces, quotes and backslashes arrive as given, and
 * `%` and `$` doubled so systemd expands neither a specifier nor a variable in them.
 */
export function commandLine(argv: string[]): string {
  return argv
    .map(
      (arg) =>
        `"${arg.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%").replace(/\$/g, "$$$$")}"`,
    )
    .join(" ");
}

export interface FoundFile {
  sha: string;
  bytes: Uint8Array;
  mode: number;
  uid: number;
  gid: number;
}

/** A regular file at declared `path` under `root`: its digest, null when absent, or why it cannot be managed. */
export async function readRegular(root: string, path: string): Promise<FoundFile | null | string> {
  const problem = placeProblem(root, path);
  if (problem) return problem;
  // walked afresh: a read here is also what an effect reads back
  const read = await readFileAt(root, path, true);
  if (read === null || typeof read === "string") return read;
  return { ...read, sha: sha256(read.bytes) };
}

/** Write declared `path` under `root` atomically (temp file, fsync, rename), making its directory if need be. */
export async function writeRegular(
  root: string,
  path: string,
  bytes: Uint8Array,
  mode = DEFAULT_FILE_MODE,
  owner?: { uid: number; gid: number },
  dirMode = DEFAULT_DIR_MODE,
): Promise<void> {
  const problem = placeProblem(root, path);
  if (problem) throw new Error(problem);
  await writeFileAt(root, path, bytes, { mode, ...owner, dirMode });
}

/** Remove a regular file or a link at declared `path` (never what a link points at); true if something went. */
export async function removeRegular(root: string, path: string): Promise<boolean> {
  const problem = placeProblem(root, path);
  if (problem) throw new Error(problem);
  return removeFileAt(root, path);
}

/**
 * Remove the directory at declared `path` and everything in it, following no link: a link inside is removed
 * itself, and a `path` that is itself a link is left alone (with the reason). Returns how many files went,
 * or why nothing was removed. Nothing above `path` is touched: the caller holds its name to the one rule.
 */
export async function removeTree(
  root: string,
  path: string,
): Promise<{ files: number; existed: boolean } | string> {
  return placeProblem(root, path) ?? removeTreeAt(root, path);
}
