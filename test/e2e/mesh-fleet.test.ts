// Changing a fleet safely, through the built executable against a real nats-server and real `mesh-host run`
// nodes. `mesh plan`: each node answers with the plan its apply would make (and the diff, never a secret's),
// and nothing changes anywhere — not a file under a node's root, not its state directory (byte for byte, mtimes
// too), not the mesh's serial, not the DECLARE stream, and a declaration pending for an offline node is still the
// one it gets. A push that drops resources is refused until allowed. Labels and facts, and `--where` over them.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { release } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MeshDir, withState } from "../../src/mesh/index.ts";
import { asController, runLinkUp as linkUp, TestMesh } from "../mesh/fleet.ts";
import { awaitOutput, mesh, meshSetUp, meshUp } from "../mesh/operator.ts";
import { asNodeUser, hasNode, nodeRecord } from "../mesh/state.ts";
import { type Running, startCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";
import { snapshot } from "../support/tmp.ts";

const WAIT = ["--wait-s", "120"];
// no drift check while the test looks: one would write the state's record of the last apply
const RUN_FLAGS = ["--drift-s", "86400"];
let m: TestMesh;

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

interface Node {
  name: string;
  state: string;
  root: string;
  run: Running | null;
}

const runLinkUp = (state: string, root: string) => linkUp(m.kept, { state, root }, RUN_FLAGS);

const site = (motd: string, extra: object[] = []) => ({
  v: 1,
  mode: "converged",
  resources: [
    { id: "motd", type: "file", path: "/etc/motd", content: motd },
    { id: "conf", type: "file", path: "/etc/app.conf", content: "port=80\n" },
    ...extra,
  ],
});

/**
 * Everything of a node the plan must not touch: its root and its state, but the run record each heartbeat
 * rewrites (and its temporary file, caught mid-write).
 */
function machine(n: Node): Record<string, string> {
  const state = Object.fromEntries(
    Object.entries(snapshot(n.state)).filter(([k]) => !/^\/\.?run\.json/.test(k)),
  );
  return {
    ...state,
    ...Object.fromEntries(Object.entries(snapshot(n.root)).map(([k, v]) => [`root${k}`, v])),
  };
}

async function outboxEmpty(n: Node): Promise<void> {
  const waiting = () =>
    existsSync(join(n.state, "outbox"))
      ? readdirSync(join(n.state, "outbox")).filter((f) => f.endsWith(".json"))
      : [];
  const deadline = Date.now() + 120_000;
  while (waiting().length && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
  expect(waiting(), n.name).toEqual([]);
}

async function declareCount(dir: string): Promise<number> {
  const nc = await asController(dir);
  try {
    return (await (await jetstreamManager(nc)).streams.info("DECLARE")).state.messages;
  } finally {
    await nc.close();
  }
}

describe("mesh plan", () => {
  let base: string;
  let dir: string;
  const nodes: Node[] = [];
  beforeAll(async () => {
    m = await TestMesh.start("mesh-plan-");
    ({ base, dir } = m);
    for (const name of ["web-1", "web-2", "web-3"])
      nodes.push(await m.node(name, { setUp: true, flags: RUN_FLAGS }));
    const pushed = await meshSetUp(dir, ["push", "--all", m.file("v1.json", site("hello\n")), ...WAIT]);
    expect(pushed.code, pushed.stderr).toBe(0);
  }, 600_000);
  afterAll(async () => {
    await m?.stop();
  });

  it("asks three nodes: each answers its plan and diff, and no machine, state, serial or stream changes", async () => {
    const [web1, web2, web3] = nodes as [Node, Node, Node];
    // web-2's machine drifted: its plan is its own, not the others'
    writeFileSync(join(web2.root, "etc/app.conf"), "port=8080\n");
    const secretFile = join(base, "token");
    writeFileSync(secretFile, "s3cret-Plan-77\n");
    const next = m.file(
      "v2.json",
      site("hello, world\n", [
        { id: "token", type: "file", path: "/etc/token", secret: "tok", mode: "0600" },
      ]),
    );
    // the last push's reports have left each outbox (the node deletes one once the bus has it): settled first
    for (const n of nodes) await outboxEmpty(n);
    const before = nodes.map(machine);
    const records = await Promise.all(nodes.map((n) => nodeRecord(dir, n.name)));
    const declared = await declareCount(dir);
    const r = await mesh(dir, ["plan", "--all", next, "--diff", "--secret", `tok=${secretFile}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^web-1: plan \(nothing changed\):\n\s+updated\s+file\s+motd/m);
    expect(r.stdout).toMatch(/created\s+file\s+token/);
    expect(r.stdout).toContain("-hello\n+hello, world");
    // web-2 alone puts its drifted file back
    const web2Text = r.stdout.slice(r.stdout.indexOf("web-2: plan"), r.stdout.indexOf("web-3: plan"));
    expect(web2Text).toMatch(/repaired\s+file\s+conf/);
    expect(r.stdout).toMatch(/^NODE\s+CHANGES\s+PLAN\n/m);
    expect(r.stdout).toMatch(/^web-2\s+3\s+/m);
    expect(r.stdout).toMatch(/^web-1\s+2\s+1 updated, 1 unchanged, 1 created/m);
    expect(r.stdout).toContain("3 of 3 node(s) would change");
    expect(r.stdout + r.stderr).not.toContain("s3cret-Plan-77");
    expect(nodes.map(machine)).toEqual(before);
    // the records on the bus, serials and all, as they were
    expect(await Promise.all(nodes.map((n) => nodeRecord(dir, n.name)))).toEqual(records);
    expect(await declareCount(dir)).toBe(declared);
    expect(readFileSync(join(web1.root, "etc/motd"), "utf8")).toBe("hello\n");
    expect(web3.run).not.toBeNull();
  });

  it("--json is one document with each node's plan and the fleet's summary", async () => {
    const r = await mesh(dir, ["plan", "web-1", "web-3", m.file("same.json", site("hello\n")), "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.nodes.map((n: { node: string; outcome: string }) => [n.node, n.outcome])).toEqual([
      ["web-1", "planned"],
      ["web-3", "planned"],
    ]);
    expect(doc.summary).toEqual({ would_change: [], unchanged: ["web-1", "web-3"], refused: [], silent: [] });
  });

  it("says an offline node at once, and the declaration pending for it is still the one it gets", async () => {
    const web3 = nodes[2]!;
    await web3.run!.stop();
    web3.run = null;
    const pending = await mesh(dir, [
      "push",
      "web-3",
      m.file("pending.json", site("pending\n")),
      "--wait-s",
      "0",
    ]);
    expect(pending.code, pending.stderr).toBe(0);
    const started = Date.now();
    const r = await mesh(dir, [
      "plan",
      "web-1",
      "web-3",
      m.file("other.json", site("other\n")),
      "--wait-s",
      "300",
    ]);
    expect(r.code, r.stderr).toBe(3);
    // no responders is the bus's word at once: the 300 s given are never waited
    expect(Date.now() - started).toBeLessThan(120_000);
    expect(r.stdout).toMatch(/^web-3: not connected to the bus$/m);
    expect(r.stdout).toMatch(/^web-3\s+-\s+offline: not connected to the bus$/m);
    expect(r.stdout).toContain("1 did not answer (web-3)");
    web3.run = await runLinkUp(web3.state, web3.root);
    const deadline = Date.now() + 120_000;
    const motd = () => readFileSync(join(web3.root, "etc/motd"), "utf8");
    while (motd() !== "pending\n" && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
    expect(motd()).toBe("pending\n");
  });

  it("a node that would refuse says why, exit 2; a bad FILE is refused here in one line", async () => {
    // a service: this test's nodes run the portable floor (no service applier), which the mesh cannot know
    const svc = m.file("svc.json", {
      v: 1,
      mode: "converged",
      resources: [{ id: "web", type: "service", unit: "web.service", state: "running" }],
    });
    const refused = await mesh(dir, ["plan", "web-1", svc]);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stdout).toMatch(/^web-1: would refuse it\n\s+refused: web\.type: /m);
    expect(refused.stdout).toMatch(/^web-1\s+-\s+refused: 1 refusal/m);
    const bad = m.file("nested.json", {
      v: 1,
      mode: "converged",
      resources: [
        { id: "a", type: "file", path: "/etc/x", content: "1" },
        { id: "b", type: "file", path: "/etc/x/y", content: "2" },
      ],
    });
    for (const [args, says] of [
      [["web-1", bad], /refused for node web-1/],
      [["web-1", join(base, "nothing.json")], /cannot read .*nothing.json: it does not exist/],
      [["nobody", m.file("ok.json", site("x"))], /node nobody is not in this mesh/],
      [["web-1"], /mesh plan web-1 needs FILE after it/],
    ] as [string[], RegExp][]) {
      const r = await mesh(dir, ["plan", ...args]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(says);
    }
  });

  it("a push that leaves out what a node last had is refused, nothing sent, until --allow-removals", async () => {
    const web1 = nodes[0]!;
    const onlyMotd = m.file("only-motd.json", {
      v: 1,
      mode: "converged",
      resources: [{ id: "motd", type: "file", path: "/etc/motd", content: "hello\n" }],
    });
    const serial = (await nodeRecord(dir, "web-1")).serial;
    const declared = await declareCount(dir);
    const refused = await mesh(dir, ["push", "web-1", onlyMotd, ...WAIT]);
    expect(refused.code).toBe(2);
    expect(refused.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(refused.stderr).toMatch(/web-1 loses conf \(file\)\. Give --allow-removals/);
    expect((await nodeRecord(dir, "web-1")).serial).toBe(serial);
    expect(await declareCount(dir)).toBe(declared);
    expect(readFileSync(join(web1.root, "etc/app.conf"), "utf8")).toBe("port=80\n");
    // the plan shows the removal the push would make
    const plan = await mesh(dir, ["plan", "web-1", onlyMotd]);
    expect(plan.stdout).toMatch(/removed\s+file\s+conf/);
    const allowed = await mesh(dir, ["push", "web-1", onlyMotd, "--allow-removals", ...WAIT]);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(existsSync(join(web1.root, "etc/app.conf"))).toBe(false);
    expect((await nodeRecord(dir, "web-1")).serial).toBe(serial + 1);
  });

  it("--where selects by labels and facts: =, !=, in, notin, KEY and !KEY; a bad selector is one line", async () => {
    for (const [name, labels] of [
      ["web-1", ["role=web", "tier=a", "canary="]],
      ["web-2", ["role=web", "tier=b"]],
      ["web-3", ["role=db", "tier=c"]],
    ] as [string, string[]][]) {
      const r = await mesh(dir, ["node", "label", name, ...labels]);
      expect(r.code, r.stderr).toBe(0);
    }
    const added = await mesh(dir, ["node", "add", "db-9", "--label", "role=db"]);
    expect(added.code, added.stderr).toBe(0);
    const picked = async (where: string) => {
      const r = await mesh(dir, ["nodes", "--where", where, "--json"]);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout).nodes as { node: string }[]).map((n) => n.node).sort();
    };
    expect(await picked("role=web")).toEqual(["web-1", "web-2"]);
    expect(await picked("role!=web")).toEqual(["db-9", "web-3"]);
    expect(await picked("tier in (a,c)")).toEqual(["web-1", "web-3"]);
    expect(await picked("tier notin (a,c)")).toEqual(["db-9", "web-2"]);
    expect(await picked("canary")).toEqual(["web-1"]);
    expect(await picked("!canary,role=web")).toEqual(["web-2"]);
    // facts the node said at enrolment
    expect(await picked("os!=android,kind=linux")).toEqual(["web-1", "web-2", "web-3"]);
    expect(await picked(`arch=${process.arch}`)).toEqual(["web-1", "web-2", "web-3"]);
    const table = await mesh(dir, ["nodes", "--where", "role=db"]);
    expect(table.stdout).toMatch(/^web-3 .*role=db,tier=c$/m);
    // removed with KEY-
    expect((await mesh(dir, ["node", "label", "web-1", "canary-"])).code).toBe(0);
    expect(await picked("canary")).toEqual([]);
    // a plan to the web tier's b alone, chosen by selector
    const plan = await mesh(dir, [
      "plan",
      "--where",
      "role=web,tier notin (a)",
      m.file("w.json", site("hello\n")),
      "--json",
    ]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout).nodes.map((n: { node: string }) => n.node)).toEqual(["web-2"]);
    const cases: [string[], RegExp][] = [
      [["nodes", "--where", "tier in (a"], /--where "tier in \(a": a "\(" is never closed/],
      [["nodes", "--where", "role web"], /an operator is missing/],
      [["push", "--where", "role=nothing", m.file("n.json", site("x"))], /selects no enrolled node/],
      [["plan", "web-1", "--all", m.file("n.json", site("x"))], /one of them/],
      [["node", "label", "web-1", "os=linux"], /is a fact the node reports/],
      [["node", "label", "web-1", "bad key=x"], /is not a label key/],
      [["node", "add", "db-8", "--label", "role"], /neither KEY=VALUE nor KEY-/],
    ];
    for (const [args, says] of cases) {
      const r = await mesh(dir, args);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toMatch(says);
    }
    expect(await hasNode(dir, "db-8")).toBe(false);
  });

  it("a node's facts follow its heartbeats: a record that says otherwise is put right", async () => {
    await withState(new MeshDir(dir), async (s) => {
      const entry = (await s.nodes.get("web-1"))!;
      await s.nodes.put("web-1", { ...entry.value, facts: { ...entry.value.facts!, kernel: "0.0-stale" } });
    });
    const deadline = Date.now() + 120_000;
    while ((await nodeRecord(dir, "web-1")).facts?.kernel !== release() && Date.now() < deadline)
      await new Promise((res) => setTimeout(res, 200));
    expect((await nodeRecord(dir, "web-1")).facts).toMatchObject({ kernel: release(), kind: "linux" });
    const r = await mesh(dir, ["nodes", "--where", "kernel=0.0-stale", "--json"]);
    expect(JSON.parse(r.stdout).nodes).toEqual([]);
  });

  it("every push and plan is a job, kept on the bus through a restart of mesh up; report shows a node's all", async () => {
    const broken = m.file("broken.json", {
      ...site("hello\n"),
      resources: [
        ...site("hello\n").resources,
        { id: "check", type: "action", run: ["false"], creates: "/var/lib/app/never" },
      ],
    });
    const watch = startCli(["mesh", "--mesh", dir, "watch", "--where", "role=web"]);
    m.keep(watch);
    await awaitOutput(watch, (o) => o.stderr.includes("following"), "watch following");
    const pushed = await mesh(dir, ["push", "web-2", broken, ...WAIT]);
    expect(pushed.code, pushed.stderr).toBe(1);
    // watch's line names the failed step and why, not counts alone
    await awaitOutput(
      watch,
      (o) => / report web-2 serial \d+ failed: .*; failed: check \(/.test(o.stdout),
      "the failed step",
    );
    expect(await watch.stop("SIGINT")).toBe(0);
    const id = /^job (\S+) /m.exec(pushed.stdout)?.[1];
    expect(id).toMatch(/^\d{8}-\d{6}-[0-9a-f]{4}$/);
    const serial = (await nodeRecord(dir, "web-2")).serial;
    // mesh up restarted: the jobs are the bus's, not its memory's
    await m.up.stop();
    m.keep(await meshUp(dir));
    const jobs = await mesh(dir, ["jobs", "--json"]);
    expect(jobs.code, jobs.stderr).toBe(0);
    const listed = JSON.parse(jobs.stdout).jobs as { id: string; kind: string }[];
    expect(listed[0]).toMatchObject({ id, kind: "push" });
    expect(listed.map((j) => j.kind)).toContain("plan");
    const text = await mesh(dir, ["jobs"]);
    expect(text.stdout).toMatch(new RegExp(`^${id}\\s+push\\s+\\S+\\s+1\\s+done\\s+failed 1$`, "m"));
    const job = await mesh(dir, ["job", id!]);
    expect(job.code, job.stderr).toBe(0);
    expect(job.stdout).toMatch(new RegExp(`^web-2\\s+failed\\s+${serial}\\s+`, "m"));
    expect(job.stdout).toMatch(/^web-2 failed:\n\s+failed\s+action\s+check\s+/m);
    const report = await mesh(dir, ["report", "web-2"]);
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toMatch(new RegExp(`^web-2: serial ${serial}, failed, `));
    expect(report.stdout).toMatch(/unchanged\s+file\s+motd/);
    const earlier = await mesh(dir, ["report", "web-2", "--serial", "1", "--json"]);
    expect(earlier.code, earlier.stderr).toBe(0);
    expect(JSON.parse(earlier.stdout)).toMatchObject({
      node: "web-2",
      serial: 1,
      report: { outcome: "applied" },
    });
    for (const [args, says] of [
      [["job", "nope"], /is not a job id/],
      [["job", "20000101-000000-0000"], /no job 20000101-000000-0000/],
      [["report", "web-2", "--serial", "999"], /has no push with serial 999/],
    ] as [string[], RegExp][]) {
      const r = await mesh(dir, args);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(says);
    }
  });

  it("a node's user may answer its own plan requests only: not another node's, nor ask one", async () => {
    const errors: string[] = [];
    const nc = await asNodeUser(dir, "web-1");
    (async () => {
      for await (const s of nc.status()) if (s.type === "error") errors.push(String(s.error));
    })();
    nc.subscribe("mesh.plan.web-2");
    nc.publish("mesh.plan.web-2", "{}");
    await nc.flush().catch(() => undefined);
    await new Promise((res) => setTimeout(res, 500));
    await nc.close().catch(() => undefined);
    expect(errors.join("\n")).toMatch(/Permissions Violation for Subscription to "mesh.plan.web-2"/);
    expect(errors.join("\n")).toMatch(/Permissions Violation for Publish to "mesh.plan.web-2"/);
  });
});
