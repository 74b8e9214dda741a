// While the servers authenticate by their user list, `node add` and `node rm` change the buckets and each
// `mesh up` renders its own servers' list from them (keeper.ts). The command then waits until the controller of
// every server has rendered (and its servers reloaded) a list at least as new as the change, so the code it prints
// works at once and a removed node is cut before it returns. A server whose controller does not answer is skipped:
// it renders the list from the bus when its `mesh up` starts. (With credentials that need no list, this goes.)
import type { NatsConnection } from "@nats-io/transport-node";
import { USERS_LIVE_MS, USERS_LIVE_POLL_MS } from "../defaults.ts";
import { type Rendered, renderedSubject } from "./keeper.ts";
import type { MeshDir } from "./layout.ts";

type Asked = "taken" | "behind" | "absent";

async function ask(nc: NatsConnection, i: number, change: Rendered): Promise<Asked> {
  try {
    const m = await nc.request(renderedSubject(i), "", { timeout: USERS_LIVE_POLL_MS * 10 });
    const r = m.json<Rendered>();
    return r.nodes >= change.nodes && r.codes >= change.codes ? "taken" : "behind";
  } catch {
    // no responders: that machine's `mesh up` is not running; a timeout: it is too busy to say, so not waited for
    return "absent";
  }
}

/** The servers (URLs) whose controller answers but had not rendered `change` within USERS_LIVE_MS. */
export async function awaitRendered(mesh: MeshDir, nc: NatsConnection, change: Rendered): Promise<string[]> {
  const urls = mesh.urls();
  const deadline = Date.now() + USERS_LIVE_MS;
  let left = urls.map((_, j) => j + 1);
  for (;;) {
    const asked = await Promise.all(left.map(async (i) => [i, await ask(nc, i, change)] as const));
    left = asked.filter(([, a]) => a === "behind").map(([i]) => i);
    if (!left.length || Date.now() > deadline) return left.map((i) => urls[i - 1]!);
    await new Promise((r) => setTimeout(r, USERS_LIVE_POLL_MS));
  }
}
