// A unit test of the direct reader's catch-up loop with a fake direct get (the lagging replica itself shows only in a
// cluster: test/e2e/direct-cluster.test.ts), and of what a membership without a consumer must name.
import { describe, expect, it } from "vitest";
import { DECLARE_CATCH_UP_TRIES } from "../../src/defaults.ts";
import { caughtUp, directRefusal, type Got, readFailure } from "../../src/link/direct.ts";
import type { Membership } from "../../src/vocabulary/index.ts";

const enc = new TextEncoder();
const got = (seq: number, text: string): Got => ({ seq, data: enc.encode(text) });

/** A direct get answered by a replica that lags `behind` answers before it has the newest. */
function lagging(behind: number, old: Got, newest: Got) {
  let asked = 0;
  return {
    get: async () => (asked++ < behind ? old : newest),
    asked: () => asked,
  };
}

describe("the direct reader's catch-up loop (unit test, a fake direct get)", () => {
  it("asks again until the answer is the wake-up's bytes", async () => {
    const replica = lagging(3, got(4, "old"), got(5, "new"));
    expect(await caughtUp(replica.get, enc.encode("new"), 1)).toEqual(got(5, "new"));
    expect(replica.asked()).toBe(4);
  });

  it("asks once with no wake-up (a look, a new link)", async () => {
    const replica = lagging(3, got(4, "old"), got(5, "new"));
    expect(await caughtUp(replica.get, null, 1)).toEqual(got(4, "old"));
    expect(replica.asked()).toBe(1);
  });

  it("gives up after DECLARE_CATCH_UP_TRIES and takes what it has: the next look finds the newer", async () => {
    const replica = lagging(1_000, got(4, "old"), got(5, "new"));
    expect(await caughtUp(replica.get, enc.encode("new"), 1)).toEqual(got(4, "old"));
    expect(replica.asked()).toBe(DECLARE_CATCH_UP_TRIES + 1);
  });

  it("a wake-up whose declaration the stream never kept: asked again, then none", async () => {
    const replica = lagging(1_000, null, null);
    expect(await caughtUp(replica.get, enc.encode("refused by the stream"), 1)).toBeNull();
  });
});

describe("a membership read directly", () => {
  const m = {
    transport: "nats",
    servers: ["tls://127.0.0.1:4222"],
    fingerprint: "0".repeat(64),
    user: "node.web-1",
    stream: "DECLARE",
    subject: "mesh.declare.web-1",
    mesh_key: "k",
  } as Membership;

  it("names DECLARE and the node's own subject", () => {
    expect(directRefusal(m, "web-1")).toBeNull();
    expect(directRefusal({ ...m, stream: "REPORTS" }, "web-1")).toMatch(/names stream REPORTS/);
    expect(directRefusal({ ...m, subject: "mesh.declare.other" }, "web-1")).toMatch(
      /not mesh\.declare\.web-1/,
    );
    expect(directRefusal({ ...m, subject: "" }, "web-1")).toMatch(/subject is empty/);
  });

  it("a refused read ends the link at once; a slow one only after PULL_FAILURES_MAX in a row", () => {
    const refused = new Error(
      'Permissions Violation for Publish to "$JS.API.DIRECT.GET.DECLARE.mesh.declare.web-1"',
    );
    expect(readFailure(refused, 1)).toMatch(/refused this node the direct read/);
    const slow = Object.assign(new Error("timeout"), { name: "TimeoutError" });
    expect(readFailure(slow, 1)).toBeNull();
    expect(readFailure(slow, 100)).toMatch(/failed 100 times in a row: the server did not answer/);
  });
});
