// Issue 9, scenario 7 without the bus: a sealed secret through plan, apply, a failing apply and a crash;
// its value is nowhere in stdout, stderr, the logs, the report or the state, and only in the declared file.
import { describe, expect, it } from "vitest";
import { offlineSecrets } from "./secrets.ts";
import { seedFrom } from "./support.ts";

describe("chaos: secrets (offline)", () => {
  it("no secret is printed, logged, reported or kept; the file holds it with its declared mode", async () => {
    const outcome = await offlineSecrets.run({ long: false, seed: seedFrom(process.env.CHAOS_SEED) });
    expect(outcome.failures).toEqual([]);
    expect(outcome.held).toBe(outcome.tried);
  });
});
