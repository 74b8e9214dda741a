// The launcher's half of a rollback: what "confirmed" means for this binary, and the note it left.
import { BinaryAtStart } from "../../run/index.ts";
import type { State } from "../../store/index.ts";

/** The executable running now, when it is the single executable (in a checkout it is Node itself: none). */
export function runningBinary(): string | null {
  const sea = process.getBuiltinModule?.("node:sea") as { isSea(): boolean } | undefined;
  return sea?.isSea() ? process.execPath : null;
}

/**
 * The running and the installed binary as this process started, each with the digest the launcher gave (it
 * hashed them before the start); one and the same when they are one file, so it is hashed at most once.
 */
export function binariesAtStart(
  running: string | null,
  installed: string | null,
  env: NodeJS.ProcessEnv = process.env,
): { running: BinaryAtStart | null; installed: BinaryAtStart | null } {
  const self = running ? new BinaryAtStart(running, env.MESH_HOST_SHA256 || undefined) : null;
  if (installed === running) return { running: self, installed: self };
  const other = installed ? new BinaryAtStart(installed, env.MESH_HOST_INSTALLED_SHA256 || undefined) : null;
  return { running: self, installed: other };
}

/**
 * Started and completed one reconcile: write this binary's digest, which the launcher reads. True once the
 * file names this binary; false when its digest cannot be known (not the single executable, changed in place).
 */
export async function confirmBinary(state: State, binary: BinaryAtStart | null): Promise<boolean> {
  // hashed now, not before the link is dialled: without the launcher that is ~100 MB read at start
  const digest = await binary?.digest();
  if (!digest) return false;
  state.writeConfirmed(digest);
  return true;
}
