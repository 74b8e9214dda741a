// The controller's state on the bus, through the built executable against real nats-servers: three `mesh up
// --only I`, each with its own copy of the mesh directory (three machines in all but the network), and a fourth
// copy with no server as a second operator console. No file is shared between them: what one adds or pushes,
// the others see through the mesh's buckets.
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MeshDir, serviceAuthenticator } from "../../src/mesh/index.ts";
import { addNode, appConf, enrolAt, Kept, runLinkUp } from "../mesh/fleet.ts";
import { freePortPairs, heldOrder, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { asNodeUser, nodeRecord } from "../mesh/state.ts";
import { type Running, runCli } from "../support/cli.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { ensureSea } from "../support/sea.ts";

const WAIT = ["--wait-s", "120"];
/** Issue 28, item 8: what one node sent in 10 s. */
const FLOOD = 287_500;
const kept = new Kept();

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

const keep = (r: Running) => kept.keep(r);

/** The server (index from 0) the process `pid` holds its link to, read from the kernel's sockets. */
function linkedServer(pid: number, ports: number[]): number {
  const ss = spawnSync("ss", ["-Htnp", "state", "established"], { encoding: "utf8" });
  for (const line of ss.stdout.split("\n")) {
    if (!line.includes(`pid=${pid},`)) continue;
    const peer = line.trim().split(/\s+/)[3] ?? "";
    const i = ports.indexOf(Number(peer.split(":").at(-1)));
    if (i >= 0) return i;
  }
  throw new Error(`process ${pid} holds no link to a server of the mesh:\n${ss.stdout}`);
}

describe("three controllers with their own copies of the mesh directory, and a second operator", () => {
  let base: string;
  let ports: number[];
  /** machine i's copy of the mesh directory (from 0), and its `mesh up --only i+1` */
  const machines: string[] = [];
  const ups: Running[] = [];
  let operator: string;
  let node: { state: string; root: string; run: Running };

  const everyConsoleAnswers = async () => {
    const deadline = Date.now() + EVENT_WAIT_MS;
    for (const dir of [...machines, operator]) {
      while ((await mesh(dir, ["nodes", "--json"])).code !== 0) {
        if (Date.now() > deadline) throw new Error(`${dir}: mesh nodes never answered after the restart`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  };
  const upOn = async (i: number) => {
    ups[i] = keep(await meshUp(machines[i]!, ["--only", String(i + 1)]));
  };
  const file = (name: string, content: string) => {
    const path = join(base, name);
    writeFileSync(path, JSON.stringify(appConf(content)));
    return path;
  };

  beforeAll(async () => {
    base = mkdtempSync(join(tmpdir(), "mesh-state-"));
    ports = await freePortPairs(3);
    const first = join(base, "machine-1", "mesh");
    mkdirSync(join(base, "machine-1"));
    await initMesh(first, ports);
    // the operator copies the directory to the other machines, as docs/mesh.md says
    for (const i of [0, 1, 2]) {
      const dir = join(base, `machine-${i + 1}`, "mesh");
      if (i) cpSync(first, dir, { recursive: true });
      machines.push(dir);
    }
    operator = join(base, "operator", "mesh");
    cpSync(first, operator, { recursive: true });
    await Promise.all([0, 1, 2].map(upOn));
  }, 300_000);

  afterAll(async () => {
    await kept.stopAll();
    rmSync(base, { recursive: true, force: true });
  });

  it("enrols through one machine, pushes from the other console, and applies when the node's machine dies", async () => {
    const { state, root } = await enrolAt(await addNode(machines[0]!, "web-1"), join(base, "web-1"));
    node = { state, root, run: await runLinkUp(kept, { state, root }) };

    const first = await mesh(operator, ["push", "web-1", file("one.json", "one\n"), ...WAIT]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^web-1: serial 1\n/);
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("one\n");

    // the machine the node is linked to goes: its server and its controller, at once
    const gone = linkedServer(node.run.child.pid!, ports);
    await ups[gone]!.stop("SIGKILL");
    const second = await mesh(operator, ["push", "web-1", file("two.json", "two\n"), ...WAIT, "--json"]);
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout).nodes[0]).toMatchObject({ serial: 2, report: { outcome: "applied" } });
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("two\n");
    expect(linkedServer(node.run.child.pid!, ports)).not.toBe(gone);
    // a surviving controller wrote the report into the fleet view, which any console reads
    const survivor = machines[(gone + 1) % 3]!;
    let row: { report: { serial: number } | null } | undefined;
    const deadline = Date.now() + 60_000;
    while (row?.report?.serial !== 2 && Date.now() < deadline) {
      const r = await mesh(survivor, ["nodes", "--json"]);
      expect(r.code, r.stderr).toBe(0);
      row = JSON.parse(r.stdout).nodes[0];
    }
    expect(row).toMatchObject({ node: "web-1", report: { outcome: "applied", serial: 2 } });
    await upOn(gone);
    // the machine is back once every console reads the state again (its server caught up, its user list loaded)
    await everyConsoleAnswers();
  });

  it("gives two operators pushing to one node at once two serials", async () => {
    const before = (await nodeRecord(operator, "web-1")).serial;
    const [a, b] = await Promise.all([
      mesh(operator, ["push", "web-1", file("a.json", "a\n"), ...WAIT, "--json"]),
      mesh(machines[1]!, ["push", "web-1", file("b.json", "b\n"), ...WAIT, "--json"]),
    ]);
    // the node may take the newer before it starts the older: that one is then superseded, or, published after
    // the newer (two machines publish in their own time), refused as older than the newest the node accepted
    const outcomes = [a, b].map((r) => JSON.parse(r.stdout).nodes[0].report?.outcome as string);
    expect(outcomes.sort(), a.stderr + b.stderr).toContain("applied");
    const newest = Math.max(...[a, b].map((r) => JSON.parse(r.stdout).nodes[0].serial as number));
    for (const r of [a, b]) heldOrder(JSON.parse(r.stdout).nodes[0], newest);
    const serials = [a, b].map((r) => JSON.parse(r.stdout).nodes[0].serial as number).sort();
    expect(serials).toEqual([before + 1, before + 2]);
    expect((await nodeRecord(machines[2]!, "web-1")).serial).toBe(before + 2);
  });

  it("answers an enrolment once with three controllers up; a code raced twice gets one answer and one refusal", async () => {
    const m = new MeshDir(operator);
    const nc = await connect({
      servers: m.urls(),
      authenticator: serviceAuthenticator(m.accountKeys(), "mesh", "mesh-test"),
      tls: { ca: m.certPem() },
    });
    // the answers the controllers publish (the questions' publish acknowledgements come here too)
    const answers: { ok: boolean; to: string }[] = [];
    nc.subscribe("_INBOX.enrol.web-2.>", {
      callback: (_e, msg) => {
        const a = msg.json<{ ok?: boolean }>();
        if (typeof a.ok === "boolean") answers.push({ ok: a.ok, to: msg.subject });
      },
    });
    await nc.flush();
    const added = await mesh(machines[2]!, ["node", "add", "web-2"]);
    expect(added.code, added.stderr).toBe(0);
    const enrols = await Promise.all(
      ["a", "b"].map((who) => {
        const root = join(base, `web-2-${who}`, "root");
        mkdirSync(root, { recursive: true });
        return runCli(["enrol", "--state", join(base, `web-2-${who}`, "state"), "--root", root], {
          input: added.stdout,
        });
      }),
    );
    const codes = enrols.map((r) => r.code).sort();
    expect(codes, JSON.stringify(enrols.map((r) => [r.code, r.stderr]))).toEqual([0, 2]);
    expect(enrols.find((r) => r.code === 2)!.stderr).toMatch(/node web-2's code has been used/);
    // one asker is given the membership, the other only refusals: never two memberships. On a busy machine an
    // asker whose answer is late asks again (ENROL_ASK_AGAIN_MS) and the spent code is answered again to the same
    // keys, at the same address: counted by where the answers went, not how many there were
    await nc.flush();
    const given = new Set(answers.filter((a) => a.ok).map((a) => a.to));
    const refused = new Set(answers.filter((a) => !a.ok).map((a) => a.to));
    expect(given.size, JSON.stringify(answers)).toBe(1);
    expect(refused.size, JSON.stringify(answers)).toBe(1);
    expect([...refused][0]).not.toBe([...given][0]);
    await nc.close();
  });

  it("gives a node no way into the buckets: no read, no write, its own record's serial unchanged", async () => {
    const before = await nodeRecord(operator, "web-1");
    const nc = await asNodeUser(operator, "web-2");
    const forged = JSON.stringify({ ...before, serial: 0, keys: (await nodeRecord(operator, "web-2")).keys });
    for (const [subject, data] of [
      ["$KV.mesh-nodes.web-1", forged],
      ["$KV.mesh-codes.web-3", "{}"],
      ["$JS.API.STREAM.MSG.GET.KV_mesh-nodes", JSON.stringify({ last_by_subj: "$KV.mesh-nodes.web-1" })],
      ["$JS.API.STREAM.PURGE.KV_mesh-nodes", ""],
    ] as const)
      await expect(nc.request(subject, data, { timeout: 5_000 }), subject).rejects.toThrow(
        /permissions|no responders|timeout/i,
      );
    await nc.close();
    expect(await nodeRecord(operator, "web-1")).toEqual(before);
  });

  it("holds a heartbeat flood from one node to that node: the others are heard and the controllers keep their link", async () => {
    const nc = await asNodeUser(operator, "web-2");
    const beat = JSON.stringify({
      v: 1,
      node: "web-2",
      at: new Date().toISOString(),
      version: "flood",
      uptime_s: 1,
      last: null,
      confirmed: false,
    });
    for (let i = 0; i < FLOOD; i++) {
      nc.publish("mesh.heartbeat.web-2", beat);
      if (i % 5_000 === 0) await nc.flush();
    }
    await nc.flush();
    await nc.close();
    const ended = Date.now();
    // web-1's heartbeats (one a second) are still taken and written: one heard after the flood ended
    let rows: { node: string; heartbeat_age_s: number | null; heartbeats_dropped: number }[] = [];
    const deadline = Date.now() + 120_000;
    const fresh = () => {
      const web1 = rows.find((r) => r.node === "web-1");
      const web2 = rows.find((r) => r.node === "web-2");
      return (
        web1?.heartbeat_age_s !== null &&
        web1 !== undefined &&
        Date.now() - web1.heartbeat_age_s! * 1000 > ended &&
        (web2?.heartbeats_dropped ?? 0) > 0
      );
    };
    while (!fresh() && Date.now() < deadline) {
      const r = await mesh(operator, ["nodes", "--json"]);
      expect(r.code, r.stderr).toBe(0);
      rows = JSON.parse(r.stdout).nodes;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(fresh(), JSON.stringify(rows)).toBe(true);
    // nearly all of the flood was dropped unread, counted against web-2 alone
    const web2 = rows.find((r) => r.node === "web-2")!;
    expect(web2.heartbeats_dropped).toBeGreaterThan(FLOOD / 2);
    expect(rows.find((r) => r.node === "web-1")!.heartbeats_dropped).toBe(0);
    // no server found any client slow (the controllers read the flood as fast as it came), every controller runs
    for (const [i, dir] of machines.entries()) {
      const log = readFileSync(join(dir, "servers", String(i + 1), "server.log"), "utf8");
      expect(log).not.toMatch(/Slow Consumer/i);
    }
    for (const up of ups) expect(up.child.exitCode).toBeNull();
    // and the mesh still answers a push at once
    const after = await mesh(operator, ["push", "web-1", file("after.json", "after\n"), ...WAIT]);
    expect(after.code, after.stderr).toBe(0);
  });

  it("with two machines of three gone, says in one line that the state needs a majority, and exits 1", async () => {
    await ups[1]!.stop("SIGKILL");
    await ups[2]!.stop("SIGKILL");
    const r = await mesh(operator, ["nodes"]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(
      /answers but its JetStream did not in time: the state needs a majority of the servers up/,
    );
  });
});
