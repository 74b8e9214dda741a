// Issue 9, scenario 5 in its short form: `reconcile` by hand while the host applies (the real RunLoop, fed from
// files until `mesh-host run` is wired), and two `apply FILE` at once.
import { describe, expect, it } from "vitest";
import { concurrency } from "./concurrency.ts";
import { seedFrom } from "./support.ts";

describe("chaos: concurrency", () => {
  it("serialized by the lock, both finish, the machine is the newest declaration's", async () => {
    const outcome = await concurrency.run({ long: false, seed: seedFrom(process.env.CHAOS_SEED) });
    expect(outcome.failures).toEqual([]);
    expect(outcome.held).toBe(outcome.tried);
  });
});
