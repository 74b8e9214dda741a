// nats.js 3.4 settles no flush pending when its connection closes (src/flushed.ts): a node whose connection died
// between its subscription and the flush that makes it the server's waited for ever, with no timer or socket left
// to end the wait (10,000 simulated nodes showed it, most of them never dialling again). Against a real nats-server
// held still by SIGSTOP, so the flush's PING is never answered, and the node's connection closed meanwhile.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flushed } from "../../src/flushed.ts";
import { EVENT_WAIT_MS, MeshDouble } from "../mesh/index.ts";

describe("a flush on a connection that closes before the server answers", () => {
  let mesh: MeshDouble;

  beforeAll(async () => {
    mesh = await MeshDouble.start();
  });

  afterAll(async () => {
    mesh?.server.resume();
    await mesh?.stop();
  });

  it("ends, rejected in our words, where nats.js's own flush waits on", async () => {
    await mesh.admit("still");
    const dialled = await mesh.dialAs("still");
    expect(dialled.ok).toBe(true);
    if (!dialled.ok) return;
    const nc = dialled.nc;
    mesh.server.pause();
    try {
      let bare = "waiting";
      void nc.flush().then(
        () => (bare = "answered"),
        () => (bare = "rejected"),
      );
      const ours = flushed(nc, "the connection closed before the server took the subscription").then(
        () => "answered",
        (e: Error) => e.message,
      );
      await nc.close();
      const ended = await Promise.race([
        ours,
        new Promise((r) => setTimeout(() => r("still waiting"), EVENT_WAIT_MS)),
      ]);
      expect(ended).toBe("the connection closed before the server took the subscription");
      // the control: the connection is closed, and nats.js's own flush has neither answer nor refusal
      expect(nc.isClosed()).toBe(true);
      expect(bare).toBe("waiting");
    } finally {
      mesh.server.resume();
    }
  });
});
