// The controller's state, its pure parts: the fleet entry two controllers merge, the per-node heartbeat budget,
// and why a code cannot be spent. The bus-facing halves are tested through the executable (test/e2e/mesh-*.ts).
import { describe, expect, it } from "vitest";
import { HEARTBEAT_BUDGET, HEARTBEAT_WINDOW_MS } from "../../src/defaults.ts";
import { codeRefusal } from "../../src/mesh/enrolments.ts";
import { merged } from "../../src/mesh/fleet.ts";
import { Budget } from "../../src/mesh/heartbeats.ts";
import type { CodeRecord, FleetEntry } from "../../src/mesh/index.ts";
import type { EnrolQuestion } from "../../src/vocabulary/index.ts";

const at = (s: number) => new Date(Date.UTC(2026, 11, 4, 12, 0, s)).toISOString();
const hb = (s: number) => ({ at: at(s), version: "1", uptime_s: s, confirmed: true });
const report = (s: number, serial: number | null, mode: string | null = "converged") => ({
  at: at(s),
  outcome: "applied",
  seq: s,
  digest: `sha256:${s}`,
  serial,
  mode,
});

describe("merged: two controllers writing one node's fleet entry", () => {
  const base: FleetEntry = { heartbeat: hb(10), report: report(10, 5), dropped_heartbeats: 3 };

  it("keeps the newer heartbeat and report, whichever controller heard them", () => {
    expect(merged(base, { heartbeat: hb(20), report: report(20, 6) })).toMatchObject({
      heartbeat: hb(20),
      report: report(20, 6),
      dropped_heartbeats: 3,
    });
    expect(merged(base, { heartbeat: hb(5), report: report(5, 6) })).toMatchObject(base);
  });

  it("keeps no report on an older serial than the one shown, and carries the mode a refusal does not say", () => {
    expect(merged(base, { report: report(20, 4) }).report).toEqual(report(10, 5));
    expect(merged(base, { report: report(20, 6, null) }).report).toEqual(report(20, 6, "converged"));
  });

  it("adds up the heartbeats dropped, from nothing when the node had no entry", () => {
    expect(merged(base, { dropped: 7 }).dropped_heartbeats).toBe(10);
    expect(merged(null, { dropped: 2 })).toMatchObject({
      heartbeat: null,
      report: null,
      dropped_heartbeats: 2,
    });
  });
});

describe("Budget: a node's heartbeats handled per window", () => {
  it("takes HEARTBEAT_BUDGET a window, drops and counts the rest, and starts again with the next window", () => {
    const b = new Budget();
    const taken = Array.from({ length: HEARTBEAT_BUDGET + 5 }, () => b.take("a", 0)).filter(Boolean);
    expect(taken).toHaveLength(HEARTBEAT_BUDGET);
    // another node's budget is its own
    expect(b.take("b", 0)).toBe(true);
    expect(b.drained()).toEqual(new Map([["a", 5]]));
    expect(b.drained()).toEqual(new Map());
    expect(b.take("a", HEARTBEAT_WINDOW_MS)).toBe(true);
  });
});

describe("codeRefusal: a code spent once, by one question's keys, before it expires", () => {
  const K = (c: string) => `${c.repeat(43)}=`;
  const keys = { identity: K("A"), sealing: K("B"), overlay: K("C") };
  const q = { v: 1, node: "web-1", reply: "_INBOX.enrol.web-1.x", keys } as unknown as EnrolQuestion;
  const code: CodeRecord = {
    node: "web-1",
    user: `U${"A".repeat(55)}`,
    added_at: at(0),
    expires_at: at(60),
    spent: null,
  };
  const now = Date.parse(at(30));

  it("lets an unspent, unexpired code be spent", () => expect(codeRefusal(code, q, now)).toBeNull());

  it("answers the question that spent it again, and refuses any other keys", () => {
    const spent = { ...code, spent: { at: at(20), keys } };
    expect(codeRefusal(spent, q, now)).toBeNull();
    const other = { ...q, keys: { ...keys, sealing: K("D") } } as EnrolQuestion;
    expect(codeRefusal(spent, other, now)).toBe("node web-1's code has been used");
  });

  it("refuses a code past its expiry, and a node with none", () => {
    expect(codeRefusal(code, q, Date.parse(at(61)))).toBe(`node web-1's code expired at ${at(60)}`);
    expect(codeRefusal(null, q, now)).toMatch(/node web-1 has no enrolment code/);
  });
});
