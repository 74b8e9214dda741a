// When a node dials again: a fleet that lost its bus together must not come back in one second (issue 20).
import { describe, expect, it } from "vitest";
import { RECONNECT_FLOOR_MS, RECONNECT_MAX_MS, REDIAL_SPREAD_S } from "../../src/defaults.ts";
import { backoffMs } from "../../src/run/index.ts";
import { rng } from "../support/random.ts";

describe("backoff", () => {
  it("dials at once first, then waits within a doubling window, never below the floor nor above the cap", () => {
    expect(backoffMs(0)).toBe(0);
    expect(backoffMs(1, () => 0)).toBe(RECONNECT_FLOOR_MS);
    expect(backoffMs(1, () => 0.999_999)).toBe(REDIAL_SPREAD_S * 1000 - 1);
    expect(backoffMs(2, () => 0.999_999)).toBe(2 * REDIAL_SPREAD_S * 1000 - 1);
    expect(backoffMs(40, () => 0.999_999)).toBe(RECONNECT_MAX_MS - 1);
    expect(backoffMs(1, () => 0.5, 1000)).toBe(RECONNECT_FLOOR_MS);
  });

  it.each([100, 1000])(
    "spreads %i nodes that lost the bus together: no second holds more than a fifth",
    (n) => {
      for (const seed of [1, 2, 3, 42, 2026]) {
        const random = rng(seed);
        const perSecond = new Map<number, number>();
        for (let i = 0; i < n; i++) {
          const s = Math.floor(backoffMs(1, random) / 1000);
          perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
        }
        expect(Math.max(...perSecond.values()), `seed ${seed}`).toBeLessThanOrEqual(n / 5);
      }
    },
  );
});
