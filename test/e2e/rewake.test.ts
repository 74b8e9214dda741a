// A push whose wake-up was lost (protocol.md "Direct reads"), through the built executable: the node's heartbeats
// go on naming the declaration before, `mesh up` hears them and wakes it again with the bytes the stream holds, and
// the node applies and reports the push — where before it waited for its next look (DECLARE_LOOK_MS, 5 min). A
// wake-up is lost when the server it crosses dies; here the pusher's connection drops it, as that server would.
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MeshDir, openState, type State } from "../../src/mesh/index.ts";
import { preparePush, publishAndWait } from "../../src/mesh/push.ts";
import { appConf, type LinkedNode, TestMesh } from "../mesh/fleet.ts";
import { waitForAsync } from "../mesh/index.ts";
import { awaitOutput, mesh } from "../mesh/operator.ts";
import { runCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

/** Past REWAKE_AFTER_MS and a few of the node's heartbeats, on a busy machine. */
const REWAKE_WAIT_MS = 240_000;

/** The connection, but every wake-up it is given to publish is dropped. */
function losingWakeUps(nc: NatsConnection): NatsConnection {
  return new Proxy(nc, {
    get(target, prop) {
      if (prop === "publish")
        return (subject: string, ...rest: unknown[]) =>
          subject.startsWith("mesh.wake.")
            ? undefined
            : (target.publish as (...a: unknown[]) => void)(subject, ...rest);
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

let m: TestMesh;
let state: State;
let node: LinkedNode;
beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("rewake-");
  node = await m.node("web-1", { flags: ["--heartbeat-s", "2"] });
  state = await openState(new MeshDir(m.dir));
}, 600_000);
afterAll(async () => {
  await state?.bus.close();
  await m?.stop();
});

describe("a push whose wake-up was lost", () => {
  it("is applied once mesh up hears the node's heartbeats name the one before and wakes it again", async () => {
    const first = await mesh(m.dir, [
      "push",
      "web-1",
      m.file("one.json", appConf("one\n")),
      "--wait-s",
      "120",
    ]);
    expect(first.code, first.stderr).toBe(0);
    const lossy: State = { ...state, bus: { ...state.bus, nc: losingWakeUps(state.bus.nc) } };
    const composed = await preparePush(lossy, ["web-1"], { file: appConf("two\n"), secrets: new Map() });
    const [pushed] = await publishAndWait(new MeshDir(m.dir), lossy, composed, 0);
    expect(pushed).toMatchObject({ serial: 2, unrecorded: null });
    const said = /woke node web-1 again: its heartbeats name declaration (\d+), behind its serial 2\n/;
    await awaitOutput(m.up, (o) => said.test(o.stdout), "mesh up's wake-up sent again", REWAKE_WAIT_MS);
    const status = async () =>
      JSON.parse((await runCli(["status", "--state", node.state, "--root", node.root, "--json"])).stdout);
    await waitForAsync(
      async () => (await status()).declaration?.serial === 2,
      REWAKE_WAIT_MS,
      "serial 2 applied",
    );
    expect((await status()).declaration).toMatchObject({ serial: 2, seq: pushed!.seq });
    // the one before is what the heartbeats named, and it was woken once
    expect(Number(said.exec(m.up.output().stdout)![1])).toBeLessThan(pushed!.seq);
    expect(m.up.output().stdout.match(/woke node web-1 again/g)).toHaveLength(1);
  });
});
