// A node's heartbeat flood, as whoever holds its state directory could send it (issue 28, item 8): run inside
// the node's machine (`ip netns exec … tsx test/support/flood.ts STATE CERT COUNT`), it signs in with the
// membership in STATE, trusting the bus's certificate CERT, and publishes COUNT heartbeats on its own subject as
// fast as the connection takes them. It prints how many it sent; the key never leaves the process.
import { sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { connect } from "@nats-io/transport-node";
import { membershipAuth } from "../../src/link/dial.ts";
import { loadKeys, State } from "../../src/store/index.ts";
import { nkeyOf } from "../../src/vocabulary/index.ts";

async function main(): Promise<void> {
  const [stateDir, certFile, countText] = process.argv.slice(2);
  const membership = new State(stateDir!).readMembership();
  if (!membership) throw new Error(`${stateDir} holds no membership`);
  const node = membership.user.replace(/^node\./, "");
  const keys = loadKeys(stateDir!);
  if (!keys.ok) throw new Error(keys.reason);
  const auth = membershipAuth(membership, keys.keys.identity.privateKey);
  if ("refused" in auth) throw new Error(auth.refused);
  const nc = await connect({
    servers: membership.servers,
    ...(auth.kind === "jwt"
      ? {
          authenticator: (nonce?: string) => ({
            jwt: auth.jwt,
            nkey: nkeyOf("user", auth.key),
            sig: sign(null, Buffer.from(nonce ?? ""), auth.key).toString("base64url"),
          }),
        }
      : { user: auth.user, pass: auth.password }),
    tls: { ca: readFileSync(certFile!, "utf8") },
  });
  const beat = JSON.stringify({
    v: 1,
    node,
    at: new Date().toISOString(),
    version: "flood",
    uptime_s: 1,
    last: null,
    confirmed: false,
  });
  const count = Number(countText);
  for (let i = 0; i < count; i++) {
    nc.publish(`mesh.heartbeat.${node}`, beat);
    if (i % 5_000 === 0) await nc.flush();
  }
  await nc.flush();
  await nc.close();
  process.stdout.write(`${count}\n`);
}

main().catch((e) => {
  process.stderr.write(`flood: ${(e as Error).message}\n`);
  process.exit(1);
});
