// Spent enrolling users revoked by `mesh up` (src/mesh/spent.ts): each no sooner than its own delay after its answer,
// every one due in one push, and one push at a time. Pushes side by side (one a code, each read back and pushed
// again when another's took its place) had a server applying NODES' claims hundreds of times a second.
import { describe, expect, it } from "vitest";
import type { Revoke } from "../../src/mesh/claims.ts";
import { MeshDir } from "../../src/mesh/index.ts";
import { SpentCodes } from "../../src/mesh/spent.ts";
import type { CodeRecord } from "../../src/mesh/state.ts";

const DELAY_MS = 50;
const PUSH_MS = 120;
const EVERY_MS = 200;
const TIMING = { delayMs: DELAY_MS, everyMs: EVERY_MS };
/** Never read: each push is the test's own. */
const NO_MESH = new MeshDir("/nonexistent");

const code = (i: number): CodeRecord => ({
  node: `n${i}`,
  user: `U${String(i).padStart(55, "A")}`,
  added_at: new Date().toISOString(),
  expires_at: new Date(Date.now() + 3_600_000).toISOString(),
  spent: null,
});

describe("SpentCodes: spent enrolling users revoked after their answers", () => {
  it("pushes one at a time and EVERY_MS apart, each no sooner than its delay, those due meanwhile together in the next", async () => {
    const added = new Map<string, number>();
    const pushes: { at: number; users: string[] }[] = [];
    let out = 0;
    let most = 0;
    const push = async (due: Revoke[]) => {
      out++;
      most = Math.max(most, out);
      pushes.push({ at: Date.now(), users: due.map((r) => r.user) });
      await new Promise((r) => setTimeout(r, PUSH_MS));
      out--;
    };
    const spent = new SpentCodes(
      NO_MESH,
      () => [],
      (l) => expect.fail(l),
      TIMING,
      push,
    );
    for (let i = 0; i < 12; i++) {
      const c = code(i);
      added.set(c.user, Date.now());
      spent.answered(c);
      await new Promise((r) => setTimeout(r, 15));
    }
    const deadline = Date.now() + 30_000;
    while (pushes.flatMap((p) => p.users).length < 12 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    await spent.stop();
    expect(most).toBe(1);
    expect(pushes.flatMap((p) => p.users).sort()).toEqual([...added.keys()].sort());
    for (const p of pushes)
      for (const u of p.users) expect(p.at - added.get(u)!).toBeGreaterThanOrEqual(DELAY_MS);
    // twelve codes 15 ms apart, each push out 120 ms: far fewer pushes than codes
    expect(pushes.length).toBeLessThan(6);
  }, 60_000);

  it("tells a failed push in one line, and pushes the next ones all the same", async () => {
    const warned: string[] = [];
    const pushed: string[] = [];
    let first = true;
    const spent = new SpentCodes(
      NO_MESH,
      () => [],
      (l) => warned.push(l),
      TIMING,
      async (due) => {
        if (first) {
          first = false;
          throw new Error("the servers refused the NODES claims");
        }
        pushed.push(...due.map((r) => r.user));
      },
    );
    spent.answered(code(1));
    await new Promise((r) => setTimeout(r, DELAY_MS + EVERY_MS * 2));
    spent.answered(code(2));
    const deadline = Date.now() + 30_000;
    while (pushed.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await spent.stop();
    expect(warned).toEqual([
      "cannot revoke spent enrolling users (their codes are spent all the same): the servers refused the NODES claims",
    ]);
    expect(pushed).toEqual([code(2).user]);
  }, 60_000);
});
