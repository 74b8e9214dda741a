// What the operator reads while the mesh runs, through the built executable against a real nats-server (issue 27,
// items 12 and 13): `mesh up` says each enrolment, addition and removal on stdout and each refused or forged
// message on stderr, one line each; a node's dials leave no error in the server's log; and the serial, never the
// stream's sequence, is what push, status, watch and `mesh nodes` say.
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeAccountKeys, seedsOf } from "../../src/mesh/accounts.ts";
import { publishDeclaration } from "../../src/mesh/index.ts";
import { addNode, appConf, asController, enrolAt, runLinkUp, TestMesh } from "../mesh/fleet.ts";
import { awaitOutput, mesh, serverDir } from "../mesh/operator.ts";
import { type Running, runCli, startCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

const WAIT = ["--wait-s", "120"];
let m: TestMesh;
const keep = (r: Running) => m.keep(r);

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

let base: string;
const sent: Uint8Array[] = [];
describe("what mesh up says, and which counter a person reads", () => {
  let dir: string;
  let up: Running;
  let state: string;
  let root: string;

  beforeAll(async () => {
    m = await TestMesh.start("mesh-said-");
    ({ base, dir, up } = m);
  }, 300_000);

  it("says an added node, its enrolment, and leaves no error in the server's log for the node's dials", async () => {
    const code = await addNode(dir, "web-1");
    await awaitOutput(up, (o) => o.stdout.includes("added node web-1\n"), "the addition said");
    ({ state, root } = await enrolAt(code, join(base, "web-1")));
    await awaitOutput(up, (o) => /enrolled node web-1 \(.+\)\n/.test(o.stdout), "the enrolment said");
    await runLinkUp(m.kept, { state, root });
    // the enrolment and the run each dialled, each with the pin's preflight first
    const log = readFileSync(join(serverDir(dir, 1), "server.log"), "utf8");
    expect(log).not.toMatch(/TLS handshake error/);
    expect(log).not.toMatch(/\[ERR\]/);
    expect(code.trim()).not.toBe("");
    expect(up.output().stdout + up.output().stderr).not.toContain(code.trim());
  });

  it("says the serial on push, status, watch and nodes; the stream's sequence only in --json", async () => {
    // what the mesh sent, byte for byte, as anyone on the bus with the controller's credential sees it
    const nc = await asController(dir);
    nc.subscribe("mesh.declare.web-1", {
      callback: (_e, m) => {
        sent.push(Uint8Array.from(m.data));
      },
    });
    await nc.flush();
    const watch = keep(startCli(["mesh", "--mesh", dir, "watch"]));
    await awaitOutput(watch, (o) => o.stderr.includes("following"), "watch following");
    const first = await mesh(dir, ["push", "web-1", m.file("one.json", appConf("one\n")), ...WAIT]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^web-1: serial 1\n/);
    expect(first.stdout).not.toMatch(/seq/);
    const json = await mesh(dir, ["push", "web-1", m.file("two.json", appConf("two\n")), ...WAIT, "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const doc = JSON.parse(json.stdout).nodes[0];
    expect(doc).toMatchObject({ node: "web-1", serial: 2, seq: expect.any(Number) });
    await awaitOutput(watch, (o) => / report web-1 serial 2 applied/.test(o.stdout), "the report watched");
    await awaitOutput(
      watch,
      (o) => / heartbeat web-1 .* last applied serial 2\n/.test(o.stdout),
      "a heartbeat",
    );
    expect(watch.output().stdout).not.toMatch(/seq/);
    const status = await runCli(["status", "--state", state, "--root", root]);
    expect(status.stdout).toMatch(/declaration: serial 2, sha256:/);
    expect(status.stdout).toMatch(/last: +applied at \S+ \(serial 2\)/);
    expect(status.stdout).not.toMatch(/seq/);
    const statusJson = JSON.parse(
      (await runCli(["status", "--state", state, "--root", root, "--json"])).stdout,
    );
    expect(statusJson.declaration).toMatchObject({ serial: 2, seq: doc.seq });
    await nc.close();
    expect(sent).toHaveLength(2);
  });

  it("says a forged or unreadable message on stderr, once, and a replay the node refused; nodes still shows what the node holds", async () => {
    const nc = await asController(dir);
    try {
      const js = jetstream(nc);
      // the first push's exact signed bytes again: the node refuses it as older
      const replayed = sent[0]!;
      const hb = { v: 1, node: "web-2", at: new Date().toISOString(), version: "0", uptime_s: 1, last: null };
      for (let i = 0; i < 3; i++)
        nc.publish("mesh.heartbeat.web-1", JSON.stringify({ ...hb, confirmed: false }));
      await js.publish("mesh.report.web-1", "not json");
      // replayed as the bus would carry a push: stored, then woken
      await publishDeclaration({ js, nc }, "web-1", replayed);
    } finally {
      await nc.close();
    }
    await awaitOutput(
      up,
      (o) => /node web-1 refused serial 1: serial 1 is older than 2/.test(o.stderr),
      "the replay's refusal said",
    );
    const err = up.output().stderr;
    // not signed by web-1's identity key (issue 28 item 5): dropped, said once, counted
    const forged = err.split("\n").filter((l) => l.includes("dropped a heartbeat on web-1's subject"));
    expect(forged).toHaveLength(1);
    expect(forged[0]).toMatch(/not signed by its identity key: not a signed heartbeat/);
    expect(err).toMatch(
      /dropped a report on web-1's subject, not signed by its identity key: the message is not JSON/,
    );
    // the fleet keeps the newest serial's report: a healthy node is not shown as refused
    let row: { report: { outcome: string; serial: number } | null; confirmed: boolean | null } | undefined;
    const deadline = Date.now() + 60_000;
    while (!(row?.report?.serial === 2 && row.confirmed) && Date.now() < deadline)
      row = JSON.parse((await mesh(dir, ["nodes", "--json"])).stdout).nodes[0];
    expect(row).toMatchObject({ report: { outcome: "applied", serial: 2 }, confirmed: true });
    const human = await mesh(dir, ["nodes"]);
    expect(human.stdout).toMatch(
      /web-1\s+converged\s+\S+\s+\d+s ago\s+applied serial 2 \d+s ago\s+yes\s+-\n/,
    );
  });

  it("a mesh directory whose controller credentials the bus refuses is said in our words (item 14)", async () => {
    const copy = join(base, "mesh-copy");
    cpSync(dir, copy, { recursive: true });
    // another mesh's MESH seed: every user this copy mints for MESH is signed by an account the servers never saw
    const seeds = JSON.parse(readFileSync(join(copy, "accounts.json"), "utf8"));
    writeFileSync(
      join(copy, "accounts.json"),
      JSON.stringify({ ...seeds, mesh: seedsOf(makeAccountKeys()).mesh }),
    );
    const r = await mesh(copy, ["nodes"]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /refuses the controller's credentials of .*mesh-copy: its servers were made from another/,
    );
    expect(r.stderr).not.toMatch(/Authorization Violation/i);
    for (const seed of Object.values(seeds) as string[]) expect(r.stderr).not.toContain(seed);
  });

  it("says a removal", async () => {
    const r = await mesh(dir, ["node", "rm", "web-1"]);
    expect(r.code, r.stderr).toBe(0);
    await awaitOutput(up, (o) => o.stdout.includes("removed node web-1:"), "the removal said");
  });
});
