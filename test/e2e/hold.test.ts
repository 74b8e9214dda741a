// The node held in its mesh, against a real nats-server with the node's exact permissions.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeMeshKey, signEnvelope } from "../../src/vocabulary/index.ts";
import { enrolAt } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, MeshDouble, waitFor } from "../mesh/index.ts";
import { type Running, runCli, startRun } from "../support/cli.ts";
import { untilFileArgv } from "../support/events.ts";
import { confDecl as decl } from "../support/offline.ts";
import { useBuiltExecutable } from "../support/sea.ts";
import { tempDir } from "../support/tmp.ts";

// the built executable: only it confirms itself (from a checkout the running binary is Node, and none is)
useBuiltExecutable();

let mesh: MeshDouble;
beforeAll(async () => {
  mesh = await MeshDouble.start();
  // enrolled as the controller enrols now: each node reads its declarations directly
  mesh.defaultReads = "direct";
});
afterAll(async () => {
  await mesh?.stop();
});

/** The sequence of the last declaration the node settled (it reads directly: no consumer keeps it for it). */
const settledSeq = (state: string): number =>
  JSON.parse(readFileSync(join(state, "settled.json"), "utf8")).meshes[mesh.meshKey.publicB64].seq;

async function enrolled(node: string) {
  const { code, token } = await mesh.enrolmentCode(node);
  const { state, root, said } = await enrolAt(code, tempDir(), { codeAs: "argument" });
  expect(said).not.toContain(token);
  return { state, root, token };
}

/** `run` with a heartbeat a second and the drift check every `driftS` seconds (each flag given once). */
function run(state: string, root: string, driftS = 2): Running {
  return startRun(state, root, ["--drift-s", String(driftS)]);
}

describe("mesh-host enrol and run against a real bus", () => {
  it("enrols (token never printed), applies a pushed declaration, heartbeats, reports, and exits 0 on SIGTERM", async () => {
    const node = "hold-a";
    const { state, root, token } = await enrolled(node);
    const membership = JSON.parse(readFileSync(join(state, "membership.json"), "utf8")).membership;
    expect(membership.user).toBe(`node.${node}`);
    const status = await runCli(["status", "--json", "--state", state, "--root", root]);
    expect(JSON.parse(status.stdout).bus).toMatchObject({ user: `node.${node}` });
    expect(status.stdout).not.toContain(membership.password);

    const host = run(state, root);
    try {
      const hb = await mesh.awaitHeartbeat(1);
      expect(hb.value).toMatchObject({ v: 1, node, version: expect.any(String) });
      // once the first reconcile completed, the binary is confirmed: the heartbeat says so, and the state
      // holds the digest of the executable that ran (a value, not merely a boolean of either kind)
      await waitFor(
        () => mesh.heartbeats.some((h) => h.value?.confirmed === true),
        EVENT_WAIT_MS,
        "confirmed",
      );
      const digest = createHash("sha256").update(readFileSync(process.env.MESH_HOST_BIN!)).digest("hex");
      expect(readFileSync(join(state, "confirmed"), "utf8")).toBe(`${digest}\n`);
      const seq = await mesh.declare(node, decl(node, "one\n"));
      const report = await mesh.awaitReport(1, { node });
      expect(report.value).toMatchObject({ node, outcome: "applied", declaration: { seq } });
      expect(report.value!.steps).toEqual([expect.objectContaining({ id: "conf", did: "created" })]);
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("one\n");
      // drift: a person edits the managed file; the timer puts it back and says so
      writeFileSync(join(root, "etc/app.conf"), "edited by hand\n");
      const repaired = await mesh.awaitReport(2, { node });
      expect(repaired.value!.steps[0]).toMatchObject({ did: "repaired" });
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("one\n");
    } finally {
      expect(await host.stop()).toBe(0);
    }
    const { stdout, stderr } = host.output();
    for (const secret of [token, membership.password]) expect(`${stdout}${stderr}`).not.toContain(secret);
    expect(existsSync(join(state, "lock"))).toBe(false);
  });

  it("the recorded mode flips only on the mesh's signed word: an offline apply and a forged envelope leave it (issue 27, item 17)", async () => {
    const node = "hold-flip";
    const { state, root } = await enrolled(node);
    const modeOf = () => JSON.parse(readFileSync(join(state, "node.json"), "utf8")).mode;
    const file = (mode: string) => {
      const f = join(tempDir(), `${mode}.json`);
      writeFileSync(f, JSON.stringify(decl(node, `${mode}\n`, { mode })));
      return f;
    };
    const adopted = await runCli(["apply", file("adopted"), "--state", state, "--root", root]);
    expect(adopted.code, adopted.stderr).toBe(0);
    expect(modeOf()).toBe("adopted");
    const offline = await runCli(["apply", file("converged"), "--state", state, "--root", root]);
    expect(offline.code).toBe(2);
    expect(modeOf()).toBe("adopted");
    const host = run(state, root);
    try {
      // converged, signed by a key that is not the mesh's: refused, the mode kept
      await mesh.publishEnvelope(
        node,
        signEnvelope(JSON.stringify(decl(node, "forged\n", { mode: "converged" })), makeMeshKey().privateKey),
      );
      expect((await mesh.awaitReport(1, { node })).value).toMatchObject({ outcome: "refused" });
      expect(modeOf()).toBe("adopted");
      // the mesh's own signed declaration: applied, and the recorded mode is converged
      await mesh.declare(node, decl(node, "mesh\n", { mode: "converged" }));
      expect((await mesh.awaitReport(2, { node })).value).toMatchObject({
        outcome: "applied",
        mode: "converged",
      });
      expect(modeOf()).toBe("converged");
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("mesh\n");
    } finally {
      await host.stop();
    }
  });

  it("refuses, reports and terminates a forged declaration, a declaration for another node, and a body that fails the schema", async () => {
    const node = "hold-b";
    const { state, root } = await enrolled(node);
    const host = run(state, root);
    try {
      await mesh.publishEnvelope(
        node,
        signEnvelope(JSON.stringify(decl(node, "forged\n")), makeMeshKey().privateKey),
      );
      const forged = await mesh.awaitReport(1, { node });
      expect(forged.value).toMatchObject({
        outcome: "refused",
        refusals: [expect.objectContaining({ field: "sig" })],
      });
      await mesh.declare(node, decl("someone-else", "x\n"));
      expect((await mesh.awaitReport(2, { node })).value!.refusals[0]).toMatchObject({ field: "node" });
      await mesh.declare(node, {
        ...decl(node, "x\n"),
        resources: [{ id: "bad", type: "file", path: "relative", content: "x" }],
      });
      expect((await mesh.awaitReport(3, { node })).value!.refusals[0]).toMatchObject({
        id: "bad",
        field: "path",
      });
      expect(existsSync(join(root, "etc/app.conf"))).toBe(false);
      // terminated: settled as the last on its subject, so neither this run nor the next reads it again
      expect(settledSeq(state)).toBe((await mesh.declared(node)).lastSeq);
    } finally {
      expect(await host.stop()).toBe(0);
    }
  });

  it("applies only the newest of three declarations pushed while the node was stopped", async () => {
    const node = "hold-c";
    const { state, root } = await enrolled(node);
    for (const n of ["1", "2", "3"]) await mesh.declare(node, decl(node, `version ${n}\n`));
    const host = run(state, root);
    try {
      const report = await mesh.awaitReport(1, { node });
      expect(report.value!.outcome).toBe("applied");
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("version 3\n");
      // once the node has settled all it was given and sent what waited, the stream holds every report it made
      await mesh.awaitSettled(node);
      await waitFor(() => readdirCount(join(state, "outbox")) === 0, EVENT_WAIT_MS, "an empty outbox");
      expect(await mesh.reportCount(node)).toBe(1);
    } finally {
      await host.stop();
    }
  });

  it("three quick pushes to a busy node: it settles what it was given and applies the newest, never an older after a newer", async () => {
    const node = "hold-f";
    const { state, root } = await enrolled(node);
    const host = run(state, root, 600);
    try {
      // this node's own: another test's heartbeats say nothing of whether this run holds the link
      await waitFor(
        () => mesh.heartbeats.some((h) => h.value?.node === node),
        EVENT_WAIT_MS,
        "a heartbeat from the node",
      );
      // busy until the test says so, however fast or slow the machine: the action waits for the gate file
      const gate = join(tempDir(), "gate");
      const slow = (content: string) => ({
        ...decl(node, content),
        resources: [
          ...decl(node, content).resources,
          {
            id: "slow",
            type: "action",
            run: untilFileArgv(gate),
            on: ["conf"],
          },
        ],
      });
      const first = await mesh.declare(node, slow("one\n"));
      // "one" is in hand once its file is written; its slow action is still running
      await waitFor(() => existsSync(join(root, "etc/app.conf")), EVENT_WAIT_MS, "the first apply");
      await mesh.declare(node, slow("two\n"));
      const third = await mesh.declare(node, slow("three\n"));
      writeFileSync(gate, "");
      // the stream keeps the last message per subject: "two" was replaced before the busy node could take it
      const reports = [];
      for (let i = 1; i <= 2; i++) reports.push((await mesh.awaitReport(i, { node })).value!);
      expect(reports.map((r) => [r.declaration.seq, r.outcome])).toEqual([
        [first, "applied"],
        [third, "applied"],
      ]);
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("three\n");
      expect(settledSeq(state)).toBe(third);
    } finally {
      await host.stop();
    }
  });

  it("survives a server restart: the report made while the bus was away waits in the outbox and arrives", async () => {
    const node = "hold-d";
    const { state, root } = await enrolled(node);
    const host = run(state, root);
    try {
      await mesh.declare(node, decl(node, "one\n"));
      await mesh.awaitReport(1, { node });
      await mesh.stopServer();
      writeFileSync(join(root, "etc/app.conf"), "drifted while the bus was away\n");
      await waitFor(
        () => readFileSync(join(root, "etc/app.conf"), "utf8") === "one\n",
        EVENT_WAIT_MS,
        "the drift repair",
      );
      await waitFor(
        () => existsSync(join(state, "outbox")) && readdirCount(join(state, "outbox")) > 0,
        EVENT_WAIT_MS,
        "a report in the outbox",
      );
      await mesh.startServer();
      const repaired = await mesh.awaitReport(2, { node });
      expect(repaired.value!.steps[0]).toMatchObject({ did: "repaired" });
      await mesh.declare(node, decl(node, "two\n"));
      await mesh.awaitReport(3, { node });
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("two\n");
    } finally {
      if (!mesh.server.running) await mesh.startServer();
      await host.stop();
    }
  });

  it("a rollback note outlives a kill before any report, and is said once, in the first report", async () => {
    const node = "hold-n";
    const { state, root } = await enrolled(node);
    const note = "rolled back from 2.0.0 (aaaa) to 1.0.0 (bbbb) after 3 failed starts";
    writeFileSync(join(state, "rollback-note"), `${note}\n`);
    const first = run(state, root);
    const beat = () => mesh.heartbeats.some((h) => h.value?.node === node);
    try {
      await waitFor(beat, EVENT_WAIT_MS, "a heartbeat from the node");
    } finally {
      await first.stop("SIGKILL");
    }
    // nothing was reported yet: the note is still the only record of the rollback
    expect(readFileSync(join(state, "rollback-note"), "utf8").trim()).toBe(note);
    const second = run(state, root);
    try {
      await mesh.declare(node, decl(node, "one\n"));
      const report = await mesh.awaitReport(1, { node });
      expect(report.value!.notes).toEqual([note]);
      expect(existsSync(join(state, "rollback-note"))).toBe(false);
      await mesh.declare(node, decl(node, "two\n"));
      const next = await mesh.awaitReport(2, { node });
      expect(next.value!.notes ?? []).toEqual([]);
    } finally {
      await second.stop();
    }
  });

  it("refuses apply FILE and runs reconcile once the node holds the mesh's declaration", async () => {
    const node = "hold-e";
    const { state, root } = await enrolled(node);
    const host = run(state, root);
    try {
      await mesh.declare(node, decl(node, "one\n"));
      await mesh.awaitReport(1, { node });
    } finally {
      await host.stop();
    }
    const file = join(tempDir(), "d.json");
    writeFileSync(file, JSON.stringify(decl(node, "offline\n")));
    const refused = await runCli(["apply", file, "--state", state, "--root", root]);
    expect(refused.code).toBe(2);
    writeFileSync(join(root, "etc/app.conf"), "edited\n");
    const dry = await runCli(["reconcile", "--dry-run", "--json", "--state", state, "--root", root]);
    expect(JSON.parse(dry.stdout).plan[0]).toMatchObject({ did: "repaired" });
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("edited\n");
    const done = await runCli(["reconcile", "--state", state, "--root", root]);
    expect(done.code).toBe(0);
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("one\n");
  });
});

function readdirCount(dir: string): number {
  return existsSync(dir) ? readdirSync(dir).length : 0;
}
