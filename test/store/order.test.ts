// The signed order's one judge (store/order.ts): per mesh key, kept before the caller applies.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { acceptedOf, admitInOrder, State } from "../../src/store/index.ts";
import type { Declaration } from "../../src/vocabulary/index.ts";
import { tempDir } from "../support/tmp.ts";

const decl = (serial?: number, issued_at: string | null = "2026-01-05T10:00:00Z"): Declaration => ({
  v: 1,
  node: "n1",
  mode: "converged",
  resources: [],
  owns_nothing: true,
  ...(serial === undefined ? {} : { serial }),
  ...(issued_at === null ? {} : { issued_at }),
});

describe("the signed order", () => {
  it("takes a higher serial (kept at once), redelivers the same body, refuses the same serial with another", () => {
    const state = new State(join(tempDir(), "state"));
    expect(admitInOrder(state, "A", decl(3), "d3")).toEqual({ ok: true, as: "newer" });
    expect(acceptedOf(state, "A")).toMatchObject({ serial: 3, digest: "d3" });
    expect(JSON.parse(readFileSync(join(state.dir, "order.json"), "utf8")).meshes.A.serial).toBe(3);
    expect(admitInOrder(state, "A", decl(3), "d3")).toEqual({ ok: true, as: "redelivery" });
    expect(admitInOrder(state, "A", decl(3), "other")).toMatchObject({
      ok: false,
      refusal: { field: "serial" },
    });
    expect(admitInOrder(state, "A", decl(2), "d2")).toEqual({
      ok: false,
      refusal: {
        id: "declaration",
        field: "serial",
        reason: "serial 2 is older than 3, the newest accepted",
      },
    });
    expect(acceptedOf(state, "A")).toMatchObject({ serial: 3, digest: "d3" });
  });

  it("keeps an order per mesh key: another mesh starts anew, and the first mesh's is kept for its return", () => {
    const state = new State(join(tempDir(), "state"));
    admitInOrder(state, "A", decl(9), "a9");
    expect(admitInOrder(state, "B", decl(1), "b1")).toEqual({ ok: true, as: "newer" });
    expect(admitInOrder(state, "A", decl(8), "a8").ok).toBe(false);
  });

  it("refuses a declaration without its order, never judges by time, and keeps nothing on a dry run", () => {
    const state = new State(join(tempDir(), "state"));
    expect(admitInOrder(state, "A", decl(undefined), "x")).toMatchObject({
      ok: false,
      refusal: { field: "serial" },
    });
    expect(admitInOrder(state, "A", decl(1, null), "x")).toMatchObject({
      ok: false,
      refusal: { field: "issued_at" },
    });
    expect(admitInOrder(state, "A", decl(1, "1999-01-01T00:00:00Z"), "x", true)).toEqual({
      ok: true,
      as: "newer",
    });
    expect(acceptedOf(state, "A")).toBeNull();
  });
});
