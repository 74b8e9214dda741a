// A declaration as the link hands it to the run loop, read from a consumer (link.ts) or directly (direct.ts), and
// what settling it answers: the one shape both readers yield.

export type Sent = { ok: true } | { ok: false; reason: string };
/** A settlement the server confirmed, or why it did not: the link that could not settle a message is no good. */
export type Settled = Sent;

/** A declaration message as delivered: its bytes, how many wait behind it, and how to settle it. */
export interface Delivered {
  /** The stream sequence it arrived with: a report's `declaration.seq`. */
  seq: number;
  data: Uint8Array;
  /**
   * The stream sequence of a newer declaration already pulled behind this one, or null: only a message in hand says
   * this one is superseded, never the consumer's count, which right after a server restart can count what is gone.
   */
  newer: number | null;
  /** How many the server said wait behind it (the count a look behind it was taken on). */
  claimed: number;
  redelivered: boolean;
  /** Keep it alive while an apply runs (an in-progress ack); no answer is waited for. */
  working(): void;
  /** Settle it; resolves when the server (a consumer) or the node's own record (a direct read) has it, or with why not. */
  ack(): Promise<Settled>;
  /** Settle it as never to be redelivered (a refused declaration); resolves when confirmed, or with why not. */
  term(): Promise<Settled>;
}
