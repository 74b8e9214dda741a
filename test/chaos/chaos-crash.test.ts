// Issue 9, scenarios 1 and 2 in their short form: SIGKILL during an apply (×20) and during a save (×20).
// The long form is `npm run test:chaos -- --long`; both run the same scenario code (test/chaos/).
import { describe, expect, it } from "vitest";
import { crashDuringApply } from "./crash-apply.ts";
import { crashDuringSave } from "./crash-save.ts";
import { seedFrom } from "./support.ts";

const seed = seedFrom(process.env.CHAOS_SEED);

describe(`chaos: crashes (seed ${seed})`, () => {
  it("an apply of 200 files killed at random: old or new, state parses, lock free, the next run finishes, undeclaring gives everything back", async () => {
    const outcome = await crashDuringApply.run({ long: false, seed });
    expect(outcome.failures).toEqual([]);
    expect(outcome.held).toBe(outcome.tried);
    expect(outcome.tried).toBe(20);
  }, 600_000);

  it("a save killed at random reads back the old or the new content, never a torn file", async () => {
    const outcome = await crashDuringSave.run({ long: false, seed });
    expect(outcome.failures).toEqual([]);
    expect(outcome.held).toBe(outcome.tried);
  });
});
