// A seeded random source for tests: the same draws every run, so a test judges the rule, not luck.
// Its own file without imports, so a unit test can use it without pulling in what the chaos harness needs.

/** mulberry32: small, fast, seeded; every choice of a scenario comes from one of these. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
