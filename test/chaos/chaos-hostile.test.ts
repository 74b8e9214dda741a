// Issue 9, scenario 4 in its short form: generated and mutated envelopes through verify + parse + plan with
// @fast-check/vitest (1,000 runs; the long form runs 12,000 through scripts/chaos.ts), then the named cases.
import { fc, test } from "@fast-check/vitest";
import { beforeAll, describe, expect, it } from "vitest";
import { arbitraryFor, checkInput, prepareBench } from "./hostile.ts";
import { namedCases } from "./hostile-named.ts";
import { seedFrom } from "./support.ts";

const bench = prepareBench();
let before = "";
beforeAll(async () => {
  await bench.baseline();
  before = bench.look();
});

const seed = seedFrom(process.env.CHAOS_SEED) | 0;

describe("chaos: hostile input", () => {
  test.prop([arbitraryFor(bench)], { numRuns: 1_000, seed })(
    "no input crashes verify + parse + plan, writes anything, or is refused in more than one line",
    async (input) => {
      expect(await checkInput(bench, input, before)).toEqual([]);
    },
    600_000,
  );

  it.each(namedCases)(
    "%s: refused in one line (or its one step failed), nothing changed",
    async (_name, check) => {
      expect(await check(bench)).toEqual([]);
    },
  );

  it("fast-check is the one the suite was written against", () => {
    expect(typeof fc.sample).toBe("function");
  });
});
