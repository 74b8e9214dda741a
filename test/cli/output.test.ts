// The words of an apply: what changed, counted otherwise; and the progress line of a long one at a terminal.
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { changesTable, progress } from "../../src/cli/output.ts";
import { PROGRESS_AFTER_MS, PROGRESS_EVERY_MS } from "../../src/defaults.ts";

const line = (did: string, id: string) => ({
  id,
  type: "file",
  did: did as "unchanged",
  detail: `/srv/${id}`,
});

describe("changesTable", () => {
  const lines = [line("unchanged", "a"), line("created", "b"), line("unchanged", "c")];

  it("lists what changes and counts the unchanged", () => {
    expect(changesTable(lines, false)).toBe(
      "  created  file  b  /srv/b\n  (2 unchanged; --verbose lists them)\n",
    );
  });

  it("lists every line when verbose, and says when nothing is declared", () => {
    expect(changesTable(lines, true).split("\n").filter(Boolean)).toHaveLength(3);
    expect(changesTable([], false)).toBe("  (nothing declared)\n");
  });

  it("is one line for a no-op of thousands", () => {
    const many = Array.from({ length: 5000 }, (_, i) => line("unchanged", `f${i}`));
    expect(changesTable(many, false)).toBe("  (5000 unchanged; --verbose lists them)\n");
  });
});

/** A stream that says it is a terminal, and what was written to it. */
function terminal(isTTY = true) {
  const stream = Object.assign(new PassThrough(), { isTTY });
  const written: string[] = [];
  stream.on("data", (b: Buffer) => written.push(b.toString()));
  return { stream, written };
}

describe("progress", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("shows nothing for an apply quicker than a second", async () => {
    vi.useFakeTimers();
    const { stream, written } = terminal();
    const p = progress(true, stream);
    p.step(1, 2);
    vi.advanceTimersByTime(PROGRESS_AFTER_MS - 1);
    p.step(2, 2);
    p.clear();
    await vi.runAllTimersAsync();
    expect(written).toEqual([]);
  });

  it("after a second says it is planning, then counts the steps, redrawn at most every 100 ms, and clears", async () => {
    vi.useFakeTimers();
    const { stream, written } = terminal();
    const p = progress(true, stream);
    vi.advanceTimersByTime(PROGRESS_AFTER_MS);
    p.clear();
    vi.advanceTimersByTime(PROGRESS_EVERY_MS);
    p.step(10, 1000);
    p.step(11, 1000);
    vi.advanceTimersByTime(PROGRESS_EVERY_MS);
    p.step(500, 1000);
    p.step(1000, 1000);
    p.clear();
    await vi.runAllTimersAsync();
    expect(written.join("").split("\r\x1b[K").filter(Boolean)).toEqual([
      "planning",
      "applying: 10/1000",
      "applying: 500/1000",
      "applying: 1000/1000",
    ]);
    expect(written.at(-1)).toBe("\r\x1b[K");
  });

  it("is never shown into a pipe, nor in --json", () => {
    vi.useFakeTimers();
    for (const [enabled, tty] of [
      [true, false],
      [false, true],
    ]) {
      const { stream, written } = terminal(tty);
      const p = progress(enabled!, stream);
      vi.advanceTimersByTime(5 * PROGRESS_AFTER_MS);
      p.step(1, 1);
      p.clear();
      expect(written).toEqual([]);
    }
  });
});
