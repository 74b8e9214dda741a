// While the servers authenticate by their user list, `node add` and `node rm` change the buckets and each
// `mesh up` renders its own servers' list from them (keeper.ts). The command then waits until every server that
// answers has taken the change — the node's user signs in, or is refused — so the code it prints works at once
// and a removed node is cut before it returns. A server that does not answer is skipped: it renders the list
// from the bus when its `mesh up` starts. (With per-node credentials that need no list, this file goes.)
import { connect } from "@nats-io/transport-node";
import { MESH_CONNECT_TIMEOUT_MS, USERS_LIVE_MS, USERS_LIVE_POLL_MS } from "../defaults.ts";
import type { MeshDir } from "./layout.ts";

type Tried = "in" | "refused" | "down";

async function tryUser(mesh: MeshDir, url: string, user: string, pass: string): Promise<Tried> {
  try {
    const nc = await connect({
      servers: url,
      user,
      pass,
      tls: { ca: mesh.certPem() },
      reconnect: false,
      timeout: MESH_CONNECT_TIMEOUT_MS,
    });
    await nc.close();
    return "in";
  } catch (e) {
    return /authorization|authentication/i.test(String((e as Error)?.message)) ? "refused" : "down";
  }
}

/** The servers (URLs) that answer but had not taken the change within USERS_LIVE_MS; empty when all had. */
export async function awaitUser(
  mesh: MeshDir,
  user: string,
  pass: string,
  want: "taken" | "gone",
): Promise<string[]> {
  const goal: Tried = want === "taken" ? "in" : "refused";
  const deadline = Date.now() + USERS_LIVE_MS;
  let left = mesh.urls();
  for (;;) {
    const tried = await Promise.all(
      left.map(async (url) => [url, await tryUser(mesh, url, user, pass)] as const),
    );
    left = tried.filter(([, t]) => t !== goal && t !== "down").map(([url]) => url);
    if (!left.length || Date.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, USERS_LIVE_POLL_MS));
  }
}
