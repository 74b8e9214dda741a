// A spent code's enrolling user, revoked after its answer: `mesh up` keeps the codes it answered, in the order the
// answers went out, and revokes each ENROL_REVOKE_DELAY_MS after its own (revoking at once would cut the connection
// the answer is on), every one due by then in one push — one push at a time, ENROL_REVOKE_EVERY_MS apart at most,
// those falling due meanwhile in the next: pushes side by side (one a code, each read back and pushed again when
// another's took its place) had a server applying an account's claims hundreds of times a second after an
// enrolment burst, and nats-server 2.9 checks every client of the account at each (docs/performance.md). Each push also raises ENROL's revocation of every user
// issued before the oldest code still to be used (nodes.ts enrolFloor), and the entries it covers go; once
// ENROL_REVOKE_ALL_MARGIN_S has passed with no batch since, the list is pushed once more to drop the last batch's.
import { ENROL_PRUNE_AFTER_MS, ENROL_REVOKE_DELAY_MS, ENROL_REVOKE_EVERY_MS } from "../defaults.ts";
import { type EnrolFloor, type Revoke, revokeOnBus } from "./claims.ts";
import type { MeshDir } from "./layout.ts";
import { codeRevoke, enrolFloor } from "./nodes.ts";
import type { CodeRecord } from "./state.ts";

export class SpentCodes {
  /** Spent enrolling users, in the order their answers went out, each with when it is due to be revoked. */
  private readonly waiting: { due: number; revoke: Revoke }[] = [];
  private dueTimer: NodeJS.Timeout | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;
  /** The push under way, and when the last one ended: the next starts no sooner than `everyMs` after it. */
  private revoking: Promise<void> | null = null;
  private lastEnded = 0;
  private stopped = false;

  constructor(
    private readonly mesh: MeshDir,
    /** The codes as this controller last read them (its keeper): what sets ENROL's floor. */
    private readonly codes: () => CodeRecord[],
    private readonly warn: (line: string) => void,
    private readonly timing = { delayMs: ENROL_REVOKE_DELAY_MS, everyMs: ENROL_REVOKE_EVERY_MS },
    /** One push: the users revoked and ENROL's floor, read back (claims.ts). */
    private readonly push: (due: Revoke[], floor: EnrolFloor) => Promise<void> = (due, floor) =>
      revokeOnBus(this.mesh, due, floor),
  ) {}

  /** The code's answer went out: its user is revoked ENROL_REVOKE_DELAY_MS from now. */
  answered(spent: CodeRecord): void {
    this.waiting.push({ due: Date.now() + this.timing.delayMs, revoke: codeRevoke(spent) });
    this.next();
  }

  /** No push started from now on; the one under way finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    if (this.pruneTimer) clearTimeout(this.pruneTimer);
    await this.revoking;
  }

  /** Every spent enrolling user now due, in one push, unless one is under way (it sets the timer when done). */
  private revokeDue(): void {
    this.dueTimer = null;
    if (this.revoking || this.stopped) return;
    const now = Date.now();
    const later = this.waiting.findIndex((s) => s.due > now);
    const due = this.waiting.splice(0, later === -1 ? this.waiting.length : later).map((s) => s.revoke);
    if (!due.length) {
      this.next();
      return;
    }
    this.revoking = this.push(due, enrolFloor(this.codes(), now))
      .catch((e: Error) =>
        this.warn(`cannot revoke spent enrolling users (their codes are spent all the same): ${e.message}`),
      )
      .finally(() => {
        this.revoking = null;
        this.lastEnded = Date.now();
        this.next();
      });
    this.pruneLater();
  }

  /** The timer set for the first one due, unless it is set or a push is under way. */
  private next(): void {
    const first = this.waiting[0];
    if (first && !this.dueTimer && !this.revoking && !this.stopped) {
      const at = Math.max(first.due, this.lastEnded + this.timing.everyMs);
      this.dueTimer = setTimeout(() => this.revokeDue(), Math.max(0, at - Date.now()));
    }
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
