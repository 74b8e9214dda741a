// The launcher's half of a rollback: what "confirmed" means for this binary, and the note it left.
import { digestOfFile } from "../../hold/index.ts";
import type { State } from "../../store/index.ts";

/** The executable running now, when it is the single executable (in a checkout it is Node itself: none). */
export function runningBinary(): string | null {
  const sea = process.getBuiltinModule?.("node:sea") as { isSea(): boolean } | undefined;
  return sea?.isSea() ? process.execPath : null;
}

/** Started and completed one reconcile: write this binary's digest, which the launcher reads. */
export function confirmBinary(state: State, binary: string | null): void {
  if (!binary) return;
  // the launcher already hashed the binary it started; hashing 100 MB again is the slow half of a start
  const digest = process.env.MESH_HOST_SHA256 || digestOfFile(binary);
  if (!digest) return;
  if (state.readText("confirmed")?.trim() !== digest) state.writeText("confirmed", `${digest}\n`);
}
