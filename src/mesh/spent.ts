// Spent enrolling users, revoked by `mesh up` a while after their answers went out: each ENROL_REVOKE_DELAY_MS
// after its own answer at the soonest (revoking at once would cut the connection the answer is on), every one due
// by then in one push, one push at a time and ENROL_REVOKE_EVERY_MS apart at most — those falling due meanwhile go
// in the next. Each push makes every server
// apply NODES' claims anew; a push a due code, run side by side, each read back and pushed again when another's
// took its place, had a server applying them hundreds of times a second after an enrolment burst
// (docs/performance.md, "The fleet simulated").
import { ENROL_REVOKE_DELAY_MS, ENROL_REVOKE_EVERY_MS } from "../defaults.ts";
import type { Revoke } from "./claims.ts";
import type { CodeRecord } from "./state.ts";

export class SpentUsers {
  /** In the order their answers went out, each with when it is due. */
  private readonly spent: { due: number; revoke: Revoke }[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** The push under way. */
  private revoking: Promise<void> | null = null;
  private stopped = false;
  /** When the last push ended: the next starts no sooner than `everyMs` after it. */
  private lastEnded = 0;

  constructor(
    /** Revoke these on the bus (one push, read back). */
    private readonly push: (due: Revoke[]) => Promise<void>,
    private readonly warn: (line: string) => void,
    private readonly delayMs = ENROL_REVOKE_DELAY_MS,
    private readonly everyMs = ENROL_REVOKE_EVERY_MS,
  ) {}

  /** The spent code's enrolling user, due `delayMs` from now. */
  add(spent: CodeRecord): void {
    const revoke = { user: spent.user, at: Math.ceil(Date.parse(spent.expires_at) / 1000), enrolling: true };
    this.spent.push({ due: Date.now() + this.delayMs, revoke });
    this.next();
  }

  /** No push started from now on; the one under way finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.revoking;
  }

  private due(): void {
    this.timer = null;
    if (this.revoking || this.stopped) return;
    const now = Date.now();
    const waiting = this.spent.findIndex((s) => s.due > now);
    const due = this.spent.splice(0, waiting === -1 ? this.spent.length : waiting).map((s) => s.revoke);
    if (!due.length) {
      this.next();
      return;
    }
    this.revoking = this.push(due)
      .catch((e: Error) =>
        this.warn(`cannot revoke spent enrolling users (their codes are spent all the same): ${e.message}`),
      )
      .finally(() => {
        this.revoking = null;
        this.lastEnded = Date.now();
        this.next();
      });
  }

  /** The timer set for the first one due, unless it is set or a push is under way (which sets it when done). */
  private next(): void {
    const first = this.spent[0];
    if (first && !this.timer && !this.revoking && !this.stopped) {
      const at = Math.max(first.due, this.lastEnded + this.everyMs);
      this.timer = setTimeout(() => this.due(), Math.max(0, at - Date.now()));
    }
  }
}
