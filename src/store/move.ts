// Moving a node to another bus without stranding it: the previous membership is kept until the new bus delivers.
import * as z from "zod";
import type { Membership } from "../vocabulary/index.ts";
import type { State } from "./state.ts";

const MoveFile = z.object({
  format: z.number().int(),
  started_at: z.string(),
  from: z.array(z.string()),
  to: z.array(z.string()),
});
export type Move = z.infer<typeof MoveFile>;

const MOVE = "move.json";
const NOTE = "move-note";

export function moveInProgress(state: State): Move | null {
  return state.readVersioned(MOVE, MoveFile);
}

/** Save the new bus as the identity, the old one beside it, and when the move began (the grace counts from there). */
export function beginMove(state: State, to: Membership, from: Membership, at = new Date()): void {
  state.writeMembership(to, true);
  state.writeVersioned(MOVE, { started_at: at.toISOString(), from: from.servers, to: to.servers });
}

/** The new bus delivered: the previous membership is discarded. */
export function finishMove(state: State): void {
  state.remove("membership.previous.json");
  state.remove(MOVE);
}

/** The new bus would not hold the node within the grace: back to the previous one, with a note to report there. */
export function returnFromMove(state: State, reason: string): boolean {
  const previous = state.readPreviousMembership();
  const move = moveInProgress(state);
  if (!previous || !move) return false;
  state.writeMembership(previous);
  state.writeText(
    NOTE,
    `move to ${move.to.join(", ")} failed: ${reason}; returned to ${previous.servers.join(", ")}\n`,
  );
  state.remove("membership.previous.json");
  state.remove(MOVE);
  return true;
}

/** Notes left for the next report (the launcher's rollback, a failed move), and how to clear the ones read. */
export interface PendingNotes {
  notes: string[];
  /** Once a report carrying them is in the outbox: each file goes only if it still says what was read. */
  clear(): void;
}

/**
 * Read, not cleared: a note is the only record of a rollback or a failed move, so it stays on disk until a
 * report carrying it is durable in the outbox; a host killed before then says it again on its next start.
 */
export function pendingNotes(state: State): PendingNotes {
  const read: { name: string; text: string }[] = [];
  for (const name of ["rollback-note", NOTE]) {
    const text = state.readText(name);
    if (text?.trim()) read.push({ name, text });
    else if (text !== null) state.remove(name);
  }
  return {
    // one line a note: the launcher appends a rollback to one not yet reported
    notes: read.flatMap((r) =>
      r.text
        .split("\n")
        .map((l) => l.trim())
        .filter(Boolean),
    ),
    clear() {
      for (const r of read) if (state.readText(r.name) === r.text) state.remove(r.name);
    },
  };
}
