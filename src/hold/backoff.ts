// When to dial again: capped exponential backoff with full jitter, so a fleet does not reconnect in step.
import { RECONNECT_MAX_MS, RECONNECT_MIN_MS } from "../defaults.ts";

/** The wait before attempt `n` (0-based): uniformly random in [0, min(max, base·2^n)], never below `base`/2 after a failure. */
export function backoffMs(
  attempt: number,
  random = Math.random,
  base = RECONNECT_MIN_MS,
  max = RECONNECT_MAX_MS,
): number {
  if (attempt <= 0) return 0;
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt - 1, 30));
  return Math.max(base / 2, Math.floor(random() * ceiling));
}
