// When to dial again: capped exponential backoff with full jitter, so a fleet does not reconnect in step.
import { RECONNECT_FLOOR_MS, RECONNECT_MAX_MS, REDIAL_SPREAD_S } from "../defaults.ts";

/**
 * The wait before attempt `n` (0-based; 0 dials at once): uniformly random in [0, min(max, spread·2^(n-1))], never
 * below the floor. The whole window is random, floor aside, so a fleet that lost its bus together spreads its return.
 */
export function backoffMs(
  attempt: number,
  random = Math.random,
  spreadMs = REDIAL_SPREAD_S * 1000,
  max = RECONNECT_MAX_MS,
): number {
  if (attempt <= 0) return 0;
  const ceiling = Math.min(max, spreadMs * 2 ** Math.min(attempt - 1, 30));
  return Math.max(RECONNECT_FLOOR_MS, Math.floor(random() * ceiling));
}
