// A revocation voids a user's JWTs issued at or before its second (nats-server compares whole seconds), so a user
// revoked and admitted again within one second was refused with its new JWT, and one revoked again within the
// second of a JWT issued after an earlier revocation kept it. Against the real nats-server `mesh up` runs (the
// built executable), with the revocation's second chosen rather than waited for: each edge is hit every run.
// Then the operator's path through the executable: `node reissue` and an enrolment with the same identity key
// (the state's membership lost, its keys kept), the node linked at once.
import { generateKeyPairSync, sign } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Authenticator, connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  issuedAfter,
  MeshDir,
  nodeUserJwt,
  revocationsOnBus,
  revokeUsers,
  serviceAuthenticator,
  shardOf,
  userOfIdentity,
} from "../../src/mesh/index.ts";
import { nkeyOf } from "../../src/vocabulary/index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { nodeRecord } from "../mesh/state.ts";
import { type Running, runCli, startRun } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

const running: Running[] = [];
let dir: string;
let base: string;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  // kept for the whole file (tempDir's go after each test)
  base = mkdtempSync(join(tmpdir(), "revoke-second-"));
  dir = join(base, "mesh");
  await initMesh(dir, await freePortPairs(1));
  running.push(await meshUp(dir));
}, 600_000);
afterAll(async () => {
  while (running.length) await running.pop()!.stop();
  rmSync(base, { recursive: true, force: true });
});

const now = () => Math.floor(Date.now() / 1000);

/** Dial as node `node`'s user `pair` with `jwt`: a connection, or the server's refusal as an error. */
async function dialAs(jwt: string, pair: ReturnType<typeof generateKeyPairSync>): Promise<NatsConnection> {
  const m = new MeshDir(dir);
  const nkey = nkeyOf("user", pair.publicKey);
  const authenticator: Authenticator = (nonce?: string) => ({
    jwt,
    nkey,
    sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
  });
  return await connect({ servers: m.urls(), authenticator, tls: { ca: m.certPem() }, reconnect: false });
}

/** Revoke `user` in the shard of `node`, where its user JWT is issued. */
async function revoke(user: string, at: number, node: string): Promise<void> {
  const m = new MeshDir(dir);
  const keys = m.accountKeys();
  const sys = await connect({
    servers: m.urls(),
    authenticator: serviceAuthenticator(keys, "system", "test"),
    tls: { ca: m.certPem() },
  });
  try {
    await revokeUsers(sys, keys, [{ user, at, enrolling: false, account: shardOf(node) }]);
  } finally {
    await sys.close();
  }
}

describe("a revocation and a JWT of the same user within one second", () => {
  it("a user admitted again in its revocation's second is issued after it, and signs in", async () => {
    const pair = generateKeyPairSync("ed25519");
    const user = nkeyOf("user", pair.publicKey);
    const keys = new MeshDir(dir).accountKeys();
    // revoked at the second a JWT issued now carries (one on, so a second turning over meanwhile changes nothing)
    await revoke(user, now() + 1, "same");
    // control: the JWT as issued before, at now, is void
    await expect(dialAs(nodeUserJwt(keys, "same", user), pair)).rejects.toThrow(/Authorization|revoked/i);
    const iat = issuedAfter(await revocationsOnBus(new MeshDir(dir), shardOf("same")), user);
    expect(iat).toBeGreaterThan(now());
    const nc = await dialAs(nodeUserJwt(keys, "same", user, iat), pair);
    await nc.close();
  });

  it("a user revoked again in the second its JWT was issued at is cut, and cannot sign in", async () => {
    const pair = generateKeyPairSync("ed25519");
    const user = nkeyOf("user", pair.publicKey);
    const keys = new MeshDir(dir).accountKeys();
    await revoke(user, now(), "again");
    // admitted again: a JWT issued after that revocation, a second or two ahead of the clock
    const jwt = nodeUserJwt(
      keys,
      "again",
      user,
      issuedAfter(await revocationsOnBus(new MeshDir(dir), shardOf("again")), user),
    );
    const nc = await dialAs(jwt, pair);
    const cut = nc.closed();
    // revoked again at once: its second is before that JWT's issued-at, yet the JWT must go
    await revoke(user, now(), "again");
    await expect(cut).resolves.toBeDefined();
    await expect(dialAs(jwt, pair)).rejects.toThrow(/Authorization|revoked/i);
  });
});

describe("node reissue, then an enrolment with the same identity key", () => {
  it("links at once: the node's new JWT is issued after the reissue's revocation", async () => {
    const added = await mesh(dir, ["node", "add", "web-1"]);
    expect(added.code, added.stderr).toBe(0);
    const state = join(base, "state");
    const root = join(base, "root");
    mkdirSync(root);
    const first = await runCli(["enrol", "--state", state, "--root", root], { input: added.stdout });
    expect(first.code, first.stderr).toBe(0);
    const reissued = await mesh(dir, ["node", "reissue", "web-1"]);
    expect(reissued.code, reissued.stderr).toBe(0);
    // the reissue's revocation of the node's identity user, dated a second on: whatever second the enrolment's
    // answer lands in, it is not past the revocation's, so a JWT issued "now" would be void
    const identity = (await nodeRecord(dir, "web-1")).keys!.identity;
    await revoke(userOfIdentity(identity)!, now() + 1, "web-1");
    // the machine kept its keys and lost its membership: it enrols again with the same identity key
    rmSync(join(state, "membership.json"));
    const again = await runCli(["enrol", "--state", state, "--root", root], { input: reissued.stdout });
    expect(again.code, again.stderr).toBe(0);
    const run = startRun(state, root);
    running.push(run);
    await awaitOutput(run, (o) => o.stderr.includes('"link up"'), "the node's link up");
    expect(run.output().stderr).not.toMatch(/removed from its mesh/);
  });
});
