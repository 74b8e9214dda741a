// The operator's whole path through the built executable against real nats-servers, as the README tells it:
// mesh init, mesh up, mesh node add, enrol (the code on stdin), run, mesh push (with a sealed secret), mesh
// nodes, mesh watch, mesh move to another mesh, mesh node rm — on one server and on a three-server cluster.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountId, MeshDir, shardOf, userOfIdentity } from "../../src/mesh/index.ts";
import { codeUser, heldRevocations } from "../mesh/enrolling.ts";
import { asController, type LinkedNode, runLinkUp as linkUp, TestMesh } from "../mesh/fleet.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { codeRecord, nodeRecord } from "../mesh/state.ts";
import { type Running, startCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";
import { snapshot } from "../support/tmp.ts";

const WAIT = ["--wait-s", "120"];
let m: TestMesh;
const keep = (r: Running) => m.keep(r);

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

type Node = LinkedNode;

/** `mesh node add`, then `enrol` with the code on stdin, then `run` until its link is up. */
async function enrolled(on: TestMesh, name: string): Promise<Node> {
  const node = await on.node(name);
  expect(node.said).not.toContain(node.code.trim());
  return node;
}

const runLinkUp = (state: string, root: string) => linkUp(m.kept, { state, root });

const declaration = (content: string, extra: object = {}) => ({
  v: 1,
  mode: "converged",
  resources: [{ id: "conf", type: "file", path: "/etc/app.conf", content }],
  ...extra,
});

function file(base: string, name: string, value: object): string {
  const path = join(base, name);
  writeFileSync(path, JSON.stringify(value));
  return path;
}

async function declared(dir: string): Promise<number> {
  const nc = await asController(dir);
  try {
    return (await (await jetstreamManager(nc)).streams.info("DECLARE")).state.messages;
  } finally {
    await nc.close();
  }
}

describe("one server: the operator's path", () => {
  let base: string;
  let dir: string;
  let node: Node;
  afterAll(async () => {
    await m?.stop();
  });
  beforeAll(async () => {
    m = await TestMesh.start("mesh-flow-");
    ({ base, dir } = m);
    node = await enrolled(m, "web-1");
  }, 300_000);

  it("spends the code at the answer, and revokes its enrolling user in ENROL on the servers (nothing rewritten)", async () => {
    expect((await nodeRecord(dir, "web-1")).enrol).toBeNull();
    // the server's resolver keeps ENROL's newest claims: the spent enrolling user is revoked there (by its own
    // entry, or by the revocation of every user issued before it), and NODES carries no enrolling user at all
    const { user, iat, issuer } = codeUser(node.code);
    expect(issuer).toBe(accountId(new MeshDir(dir).accountKeys(), "enrol"));
    const revoked = () => {
      const held = heldRevocations(dir, "ENROL");
      return Math.max(held[user] ?? 0, held["*"] ?? 0) >= iat;
    };
    const deadline = Date.now() + 60_000;
    while (!revoked() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(revoked()).toBe(true);
    expect(heldRevocations(dir, "NODES")).toEqual({});
    expect(readFileSync(join(dir, "servers/1/server.conf"), "utf8")).not.toContain("web-1");
    // the spent code goes from mesh-codes once the node speaks as itself
    while ((await codeRecord(dir, "web-1")) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 200));
    expect(await codeRecord(dir, "web-1")).toBeNull();
  });

  it("push signs with serial 1, 2, …, waits for the report and prints it the way apply does", async () => {
    const decl = file(base, "one.json", declaration("one\n"));
    const first = await mesh(dir, ["push", "web-1", decl, ...WAIT]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^web-1: serial 1\n/);
    expect(first.stdout).toMatch(/created\s+file\s+conf\s+\/etc\/app.conf created/);
    expect(first.stdout).toContain("applied: 1 created");
    // off a terminal, the wait is said as plain lines on stderr, one as each report arrives
    expect(first.stderr).toContain("mesh push: web-1 reported applied; 1 of 1 reported\n");
    expect(first.stderr).not.toContain("\r");
    expect(readFileSync(join(node.root, "etc/app.conf"), "utf8")).toBe("one\n");
    const second = await mesh(dir, [
      "push",
      "web-1",
      file(base, "two.json", declaration("two\n")),
      ...WAIT,
      "--json",
    ]);
    expect(second.code, second.stderr).toBe(0);
    const doc = JSON.parse(second.stdout);
    expect(doc.nodes[0]).toMatchObject({ node: "web-1", serial: 2, report: { outcome: "applied" } });
    expect((await nodeRecord(dir, "web-1")).serial).toBe(2);
  });

  it("seals --secret to the node: the value reaches the file and nothing the mesh prints or keeps", async () => {
    const value = "hunter2-Zq9";
    const secretFile = join(base, "dbpw");
    writeFileSync(secretFile, `${value}\n`);
    const decl = file(base, "secret.json", {
      v: 1,
      mode: "converged",
      resources: [{ id: "pw", type: "file", path: "/etc/db.pw", secret: "dbpw", mode: "0600" }],
    });
    // it leaves out conf, which the node last had: said first, then allowed
    const refused = await mesh(dir, ["push", "web-1", decl, "--secret", `dbpw=${secretFile}`]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /removes what the node last had: web-1 loses conf \(file\)\. Give --allow-removals/,
    );
    const r = await mesh(dir, [
      "push",
      "web-1",
      decl,
      "--secret",
      `dbpw=${secretFile}`,
      "--allow-removals",
      ...WAIT,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(node.root, "etc/db.pw"), "utf8")).toBe(value);
    expect(r.stdout + r.stderr).not.toContain(value);
    // nowhere in the mesh directory (records, fleet view, the servers' logs and stores) is it in the clear
    const files = Object.entries(snapshot(dir)).filter(([, kind]) => kind.startsWith("file"));
    for (const [path] of files) expect(readFileSync(join(dir, path)).includes(value), path).toBe(false);
    expect(JSON.stringify((await nodeRecord(dir, "web-1")).last_body)).toMatch(/"dbpw":"v1:/);
    expect(JSON.stringify(await nodeRecord(dir, "web-1"))).not.toContain(value);
  });

  it("refuses a push that is wrong, sending nothing and using no serial", async () => {
    const before = await declared(dir);
    const serial = (await nodeRecord(dir, "web-1")).serial;
    const cases: [string[], RegExp][] = [
      [
        ["web-1", file(base, "other.json", declaration("x", { node: "web-2" }))],
        /names node "web-2", not web-1/,
      ],
      [
        [
          "web-1",
          file(base, "bad.json", { v: 1, mode: "converged", resources: [{ id: "x", type: "file" }] }),
        ],
        /refused for node web-1: resource "x"/,
      ],
      [
        ["web-1", file(base, "unused.json", declaration("x")), "--secret", `nothing=${join(base, "dbpw")}`],
        /--secret nothing: no resource of the declaration reads secret/,
      ],
      [
        [
          "web-1",
          file(base, "installer.json", {
            v: 1,
            mode: "converged",
            secrets: { dbpw: "installer" },
            resources: [{ id: "pw", type: "file", path: "/etc/db.pw", secret: "dbpw" }],
          }),
        ],
        /refused for node web-1: secret "dbpw" is "installer", .*--secret dbpw=FILE/,
      ],
      [["web-1", join(base, "missing.json")], /cannot read .*missing.json: it does not exist/],
      [["web-1", oversized(base)], /huge\.json is 16\.5 MiB, more than the 16 MiB allowed/],
      [["web-1"], /mesh push web-1 needs FILE after it, the declaration to push/],
      [["nobody", file(base, "ok.json", declaration("x"))], /node nobody is not in this mesh/],
      [
        ["web-1", file(base, "ok.json", declaration("x")), "--wait-s", "soon"],
        /--wait-s must be a whole number/,
      ],
    ];
    for (const [args, says] of cases) {
      const r = await mesh(dir, ["push", ...args]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(says);
    }
    expect((await nodeRecord(dir, "web-1")).serial).toBe(serial);
    expect(await declared(dir)).toBe(before);
  });

  it("nodes shows the node's mode, version, heartbeat and last report; watch follows them as they come", async () => {
    const watch = keep(startCli(["mesh", "--mesh", dir, "watch", "--json"]));
    await awaitOutput(watch, (o) => o.stderr.includes("following"), "watch following");
    await awaitOutput(watch, (o) => o.stdout.includes('"kind":"heartbeat"'), "a heartbeat line");
    const pushed = await mesh(dir, [
      "push",
      "--all",
      "--allow-removals",
      file(base, "three.json", declaration("three\n")),
      ...WAIT,
    ]);
    expect(pushed.code, pushed.stderr).toBe(0);
    await awaitOutput(watch, (o) => o.stdout.includes('"kind":"report"'), "a report line");
    const line = watch
      .output()
      .stdout.split("\n")
      .find((l) => l.includes('"kind":"report"'))!;
    expect(JSON.parse(line)).toMatchObject({ node: "web-1", report: { outcome: "applied" } });
    expect(await watch.stop("SIGINT")).toBe(0);
    const serial = (await nodeRecord(dir, "web-1")).serial;
    // the fleet view is written by `up` as reports arrive: read until it holds this one
    let rows: { node: string; report: { serial: number } | null }[] = [];
    const deadline = Date.now() + 60_000;
    while (rows[0]?.report?.serial !== serial && Date.now() < deadline)
      rows = JSON.parse((await mesh(dir, ["nodes", "--json"])).stdout).nodes;
    expect(rows[0]).toMatchObject({
      node: "web-1",
      mode: "converged",
      report: { outcome: "applied", serial },
    });
    const human = await mesh(dir, ["nodes"]);
    expect(human.stdout).toMatch(/^NODE\s+MODE\s+VERSION\s+HEARTBEAT\s+LAST REPORT\s+CONFIRMED\s+LABELS\n/);
    expect(human.stdout).toMatch(
      new RegExp(`web-1\\s+converged\\s+\\S+\\s+\\d+s ago\\s+applied serial ${serial}`),
    );
  });

  it("refuses a wrong move in one line, changing no node record", async () => {
    const notMesh = join(base, "not-a-mesh");
    mkdirSync(notMesh, { recursive: true });
    const before = await nodeRecord(dir, "web-1");
    const cases: [string[], RegExp][] = [
      [["move", "web-1", "--to", notMesh], /not-a-mesh is not a mesh \(no mesh.json\)/],
      [["move", "web-1", "--to", dir], /--to .* is this mesh/],
      [["move", "web-1"], /mesh move needs --to DIR2/],
      [["move", "nobody", "--to", notMesh], /node nobody is not in this mesh/],
    ];
    for (const [args, says] of cases) {
      const r = await mesh(dir, args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(says);
    }
    expect(await nodeRecord(dir, "web-1")).toEqual(before);
  });

  it("moves the node to another mesh: it applies, restarts on the other bus, and takes its declarations there", async () => {
    const other = join(base, "mesh-b");
    await initMesh(other, await freePortPairs(1));
    keep(await meshUp(other));
    const moved = await mesh(dir, ["move", "web-1", "--to", other, ...WAIT]);
    expect(moved.code, moved.stderr).toBe(0);
    expect(moved.stdout).toMatch(/moved web-1: it now dials nats:\/\/127\.0\.0\.1:\d+/);
    // the host exits cleanly after a move, for its service manager to start it on the new bus
    expect(await node.run.exited).toBe(0);
    node.run = await runLinkUp(node.state, node.root);
    const there = await mesh(other, ["push", "web-1", file(base, "b.json", declaration("on b\n")), ...WAIT]);
    expect(there.code, there.stderr).toBe(0);
    expect(there.stdout).toMatch(/^web-1: serial 1\n/);
    expect(readFileSync(join(node.root, "etc/app.conf"), "utf8")).toBe("on b\n");
    const again = await mesh(dir, ["push", "web-1", file(base, "a.json", declaration("x"))]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/node web-1 has moved to the mesh at/);
  });

  it("node rm revokes the node: its record goes, and a push to it is refused", async () => {
    const user = userOfIdentity((await nodeRecord(dir, "web-1")).keys!.identity);
    const r = await mesh(dir, ["node", "rm", "web-1"]);
    expect(r.code, r.stderr).toBe(0);
    // its shard's claims carry the node's revocation and nothing of its enrolment: they grow with nodes removed
    // only; NODES' and every other shard's are not pushed
    expect(Object.keys(heldRevocations(dir, shardOf("web-1")))).toEqual([user]);
    expect(heldRevocations(dir, "NODES")).toEqual({});
    const nodes = await mesh(dir, ["nodes", "--json"]);
    expect(JSON.parse(nodes.stdout).nodes).toEqual([]);
    const push = await mesh(dir, ["push", "web-1", file(base, "gone.json", declaration("x"))]);
    expect(push.code).toBe(2);
    expect(push.stderr).toMatch(/node web-1 is not in this mesh/);
  });
});

describe("a three-server cluster", () => {
  it("enrols a node and pushes to it through any server", async () => {
    m = await TestMesh.start("mesh-cluster-", 3);
    try {
      const { base, dir } = m;
      const node = await enrolled(m, "edge-1");
      const r = await mesh(dir, [
        "push",
        "edge-1",
        file(base, "c.json", declaration("clustered\n")),
        ...WAIT,
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(readFileSync(join(node.root, "etc/app.conf"), "utf8")).toBe("clustered\n");
      await node.run.stop();
    } finally {
      await m.stop();
    }
  });
});

/** A file half a MiB over the declaration's limit: the push says its size in MiB, never in raw bytes. */
function oversized(base: string): string {
  const path = join(base, "huge.json");
  writeFileSync(path, Buffer.alloc(16.5 * 1024 * 1024, " "));
  return path;
}
