// A spent code's enrolling user, revoked after its answer: `mesh up` keeps the codes it answered, in the order the
// answers went out, and revokes each ENROL_REVOKE_DELAY_MS after its own (revoking at once would cut the connection
// the answer is on), every one due by then in one push. Each push also raises ENROL's revocation of every user
// issued before the oldest code still to be used (nodes.ts enrolFloor), and the entries it covers go; once
// ENROL_REVOKE_ALL_MARGIN_S has passed with no batch since, the list is pushed once more to drop the last batch's.
import { ENROL_PRUNE_AFTER_MS, ENROL_REVOKE_DELAY_MS } from "../defaults.ts";
import { type Revoke, revokeOnBus } from "./claims.ts";
import type { MeshDir } from "./layout.ts";
import { codeRevoke, enrolFloor } from "./nodes.ts";
import type { CodeRecord } from "./state.ts";

export class SpentCodes {
  /** Spent enrolling users, in the order their answers went out, each with when it is due to be revoked. */
  private readonly waiting: { due: number; revoke: Revoke }[] = [];
  private dueTimer: NodeJS.Timeout | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly mesh: MeshDir,
    /** The codes as this controller last read them (its keeper): what sets ENROL's floor. */
    private readonly codes: () => CodeRecord[],
    private readonly warn: (line: string) => void,
  ) {}

  /** The code's answer went out: its user is revoked ENROL_REVOKE_DELAY_MS from now. */
  answered(spent: CodeRecord): void {
    this.waiting.push({ due: Date.now() + ENROL_REVOKE_DELAY_MS, revoke: codeRevoke(spent) });
    this.dueTimer ??= setTimeout(() => this.revokeDue(), ENROL_REVOKE_DELAY_MS);
  }

  stop(): void {
    if (this.dueTimer) clearTimeout(this.dueTimer);
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
  }

  /** Every spent enrolling user now due, in one push; the timer set again for the next one due. */
  private revokeDue(): void {
    this.dueTimer = null;
    const now = Date.now();
    const later = this.waiting.findIndex((s) => s.due > now);
    const due = this.waiting.splice(0, later === -1 ? this.waiting.length : later).map((s) => s.revoke);
    if (due.length) {
      void revokeOnBus(this.mesh, due, enrolFloor(this.codes(), now)).catch((e: Error) =>
        this.warn(`cannot revoke spent enrolling users (their codes are spent all the same): ${e.message}`),
      );
      this.pruneLater();
    }
    const next = this.waiting[0];
    if (next) this.dueTimer = setTimeout(() => this.revokeDue(), next.due - now);
  }

  /** ENROL's list pushed once more when the last batch's users may be under the floor (nothing pushed if not). */
  private pruneLater(): void {
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    this.pruneTimer = setTimeout(() => {
      this.pruneTimer = null;
      void revokeOnBus(this.mesh, [], enrolFloor(this.codes())).catch((e: Error) =>
        this.warn(`cannot prune ENROL's revocations (each stays in force): ${e.message}`),
      );
    }, ENROL_PRUNE_AFTER_MS);
  }
}
