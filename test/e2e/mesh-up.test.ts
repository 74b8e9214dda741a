// `mesh up` against real nats-servers, through the built executable: one server, then a three-server cluster.
// The users `node add` makes are live at once on running servers (JWTs: nothing rewritten, never reloaded or
// restarted) and cut off by `node rm` (a revocation pushed over the system account); a dying server takes `mesh up`
// down with it.
import { sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { type Authenticator, connect } from "@nats-io/transport-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { MeshDir, serviceAuthenticator } from "../../src/mesh/index.ts";
import { decodeCode, keyPairOfSeed, nkeyOf } from "../../src/vocabulary/index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp, serverDir } from "../mesh/operator.ts";
import { type Running, startCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

const started: Running[] = [];
afterEach(async () => {
  while (started.length) await started.pop()!.stop();
});

async function up(dir: string, extra: string[] = []): Promise<Running> {
  const r = await meshUp(dir, extra);
  started.push(r);
  return r;
}

/** Connect with `authenticator`, trusting the mesh's certificate: a connection, or the server's refusal as an error. */
async function asUser(dir: string, url: string, authenticator: Authenticator) {
  const ca = readFileSync(join(dir, "tls/cert.pem"), "utf8");
  return await connect({ servers: url, authenticator, tls: { ca }, reconnect: false, timeout: 10_000 });
}

/** The controller's sign-in: a user of MESH minted from the mesh directory's account key. */
const asMesh = (dir: string) => serviceAuthenticator(new MeshDir(dir).accountKeys(), "mesh", "test");

/** A code's enrolling user: its JWT, the nonce signed with the seed's key. */
function codeAuth(code: { jwt: string; seed: string }): Authenticator {
  const pair = keyPairOfSeed("user", code.seed)!;
  const nkey = nkeyOf("user", pair.publicKey);
  return (nonce?: string) => ({
    jwt: code.jwt,
    nkey,
    sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
  });
}

const pidOf = (dir: string, i: number) => Number(readFileSync(join(serverDir(dir, i), "server.pid"), "utf8"));

async function addAndTry(dir: string, name: string) {
  const added = await mesh(dir, ["node", "add", name]);
  expect(added.code, added.stderr).toBe(0);
  const code = decodeCode(added.stdout);
  if (!code.ok || !("jwt" in code.value)) throw new Error("not a v2 code");
  return codeAuth(code.value);
}

describe("mesh up, one server", () => {
  it("runs the server with the streams, takes node add and rm live, never restarting it", async () => {
    const [port] = await freePortPairs(1);
    const dir = join(tempDir(), "m");
    await initMesh(dir, [port!]);
    const running = await up(dir);
    expect(running.output().stdout).toContain(`server 1 ready on nats://127.0.0.1:${port}`);
    const url = `nats://127.0.0.1:${port}`;
    const pid = pidOf(dir, 1);
    // the controller's streams: DECLARE keeps one message a subject
    const nc = await asUser(dir, url, asMesh(dir));
    const jsm = await jetstreamManager(nc);
    const names = (await jsm.streams.names().next()).sort();
    // and the controller's state: its four key-value buckets
    expect(names).toEqual([
      "DECLARE",
      "ENROL",
      "KV_mesh-codes",
      "KV_mesh-fleet",
      "KV_mesh-jobs",
      "KV_mesh-nodes",
      "REKEY",
      "REPORTS",
    ]);
    expect((await jsm.streams.info("DECLARE")).config.max_msgs_per_subject).toBe(1);
    // bounded per node and in all (protocol.md "Limits")
    const reports = (await jsm.streams.info("REPORTS")).config;
    expect(reports.max_msgs_per_subject).toBeGreaterThan(0);
    expect(reports.max_bytes).toBeGreaterThan(0);
    for (const s of ["ENROL", "REKEY"])
      expect((await jsm.streams.info(s)).config.max_msgs_per_subject, s).toBeGreaterThan(0);
    await nc.close();

    const enrolling = await addAndTry(dir, "web-1");
    // live at once, and held: a connection that stays open until `node rm` cuts it
    const enrol = await asUser(dir, url, enrolling);
    const cut = enrol.closed();
    const rm = await mesh(dir, ["node", "rm", "web-1"]);
    expect(rm.code, rm.stderr).toBe(0);
    await expect(cut).resolves.toBeDefined();
    await expect(asUser(dir, url, enrolling)).rejects.toThrow(/Authorization/i);
    expect(readFileSync(join(serverDir(dir, 1), "server.log"), "utf8")).not.toContain("Reloaded server");
    expect(pidOf(dir, 1)).toBe(pid);
    // a second `up` of the same mesh is refused while this one runs
    const again = await mesh(dir, ["up"]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/server 1 of this mesh is already running/);
  });

  it("exits 1 when its server dies, saying which", async () => {
    const [port] = await freePortPairs(1);
    const dir = join(tempDir(), "m");
    await initMesh(dir, [port!]);
    const running = await up(dir);
    process.kill(pidOf(dir, 1), "SIGKILL");
    expect(await running.exited).toBe(1);
    expect(running.output().stderr).toMatch(/server 1 killed by SIGKILL: the others are stopped/);
  });

  it("stops its server when stopped, and exits 0", async () => {
    const [port] = await freePortPairs(1);
    const dir = join(tempDir(), "m");
    await initMesh(dir, [port!]);
    const running = await up(dir);
    const pid = pidOf(dir, 1);
    expect(await running.stop("SIGTERM")).toBe(0);
    expect(() => process.kill(pid, 0)).toThrow();
  });
});

describe("mesh up, a three-server cluster", () => {
  it("replicates the streams on all three, and a node added is live on every server with none reloaded", async () => {
    const ports = await freePortPairs(3);
    const dir = join(tempDir(), "m");
    await initMesh(dir, ports);
    const running = await up(dir);
    for (const i of [1, 2, 3]) expect(running.output().stdout).toContain(`server ${i} ready`);
    const nc = await asUser(dir, `nats://127.0.0.1:${ports[1]}`, asMesh(dir));
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info("REPORTS");
    expect(info.config.num_replicas).toBe(3);
    for (const bucket of ["mesh-nodes", "mesh-codes", "mesh-fleet", "mesh-jobs"])
      expect((await jsm.streams.info(`KV_${bucket}`)).config.num_replicas, bucket).toBe(3);
    await nc.close();
    const pids = [1, 2, 3].map((i) => pidOf(dir, i));
    const enrolling = await addAndTry(dir, "web-1");
    for (const port of ports) await (await asUser(dir, `nats://127.0.0.1:${port}`, enrolling)).close();
    // a revocation pushed to one server reaches the other two (the full resolver)
    const rm = await mesh(dir, ["node", "rm", "web-1"]);
    expect(rm.code, rm.stderr).toBe(0);
    for (const port of ports)
      await expect(asUser(dir, `nats://127.0.0.1:${port}`, enrolling)).rejects.toThrow(/Authorization/i);
    expect([1, 2, 3].map((i) => pidOf(dir, i))).toEqual(pids);
  });

  it("--only I runs server I alone", async () => {
    const ports = await freePortPairs(3);
    const dir = join(tempDir(), "m");
    await initMesh(dir, ports);
    const one = startOnly(dir, 2);
    started.push(one);
    await one.ready;
    expect(one.output().stdout).toContain(`server 2 ready on nats://127.0.0.1:${ports[1]}`);
    expect(one.output().stdout).not.toContain("server 1 ready");
  });
});

function startOnly(dir: string, i: number): Running & { ready: Promise<void> } {
  const r = startCli(["mesh", "--mesh", dir, "up", "--only", String(i)]);
  const ready = awaitOutput(r, (o) => o.stdout.includes(`server ${i} ready`), `server ${i} ready`);
  return Object.assign(r, { ready });
}
