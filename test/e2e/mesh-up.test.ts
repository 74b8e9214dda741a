// `mesh up` against real nats-servers, through the built executable: one server, then a three-server cluster.
// The users `node add` makes are live at once on running servers (reloaded, never restarted) and gone after
// `node rm`; a dying server takes `mesh up` down with it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { MeshDir } from "../../src/mesh/index.ts";
import { decodeCode } from "../../src/vocabulary/index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp, serverDir } from "../mesh/operator.ts";
import { nodeRecord } from "../mesh/state.ts";
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

/** Connect as `user`, trusting the mesh's certificate: a connection, or the server's refusal as an error. */
async function asUser(dir: string, url: string, user: string, pass: string) {
  const ca = readFileSync(join(dir, "tls/cert.pem"), "utf8");
  return await connect({ servers: url, user, pass, tls: { ca }, reconnect: false, timeout: 10_000 });
}

const pidOf = (dir: string, i: number) => Number(readFileSync(join(serverDir(dir, i), "server.pid"), "utf8"));

async function addAndTry(dir: string, name: string) {
  const added = await mesh(dir, ["node", "add", name]);
  expect(added.code, added.stderr).toBe(0);
  const code = decodeCode(added.stdout);
  if (!code.ok) throw new Error(code.reason);
  return code.value.token;
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
    const secrets = new MeshDir(dir).secrets();
    const nc = await asUser(dir, url, "mesh", secrets.controller);
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
    await nc.close();

    const token = await addAndTry(dir, "web-1");
    const enrol = await asUser(dir, url, "enrol.web-1", token);
    await enrol.close();
    const password = (await nodeRecord(dir, "web-1")).password;
    const node = await asUser(dir, url, "node.web-1", password);
    await node.close();

    const rm = await mesh(dir, ["node", "rm", "web-1"]);
    expect(rm.code, rm.stderr).toBe(0);
    await expect(asUser(dir, url, "node.web-1", password)).rejects.toThrow(/Authorization/i);
    await expect(asUser(dir, url, "enrol.web-1", token)).rejects.toThrow(/Authorization/i);
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
  it("replicates the streams on all three and reloads every server on node add", async () => {
    const ports = await freePortPairs(3);
    const dir = join(tempDir(), "m");
    await initMesh(dir, ports);
    const running = await up(dir);
    for (const i of [1, 2, 3]) expect(running.output().stdout).toContain(`server ${i} ready`);
    const secrets = new MeshDir(dir).secrets();
    const nc = await asUser(dir, `nats://127.0.0.1:${ports[1]}`, "mesh", secrets.controller);
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info("REPORTS");
    expect(info.config.num_replicas).toBe(3);
    for (const bucket of ["mesh-nodes", "mesh-codes", "mesh-fleet", "mesh-jobs"])
      expect((await jsm.streams.info(`KV_${bucket}`)).config.num_replicas, bucket).toBe(3);
    await nc.close();
    const pids = [1, 2, 3].map((i) => pidOf(dir, i));
    const token = await addAndTry(dir, "web-1");
    for (const port of ports) (await asUser(dir, `nats://127.0.0.1:${port}`, "enrol.web-1", token)).close();
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
