// The signed order (protocol.md, "The signed order"), attacked as issue 18 found it: through the real
// executable and a real nats-server, a replay of an older envelope's exact bytes must change nothing.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { Envelope } from "../../src/vocabulary/index.ts";
import { enrolAt } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, type MeshDouble, waitFor } from "../mesh/index.ts";
import { type Running, runCli, startRun } from "../support/cli.ts";
import { untilFileArgv } from "../support/events.ts";
import { meshForFile } from "../support/mesh-file.ts";
import { confDecl as decl } from "../support/offline.ts";
import { snapshot, tempDir } from "../support/tmp.ts";

let mesh: MeshDouble;
meshForFile((m) => {
  mesh = m;
  // enrolled as the controller enrols now: each node reads its declarations directly
  mesh.defaultReads = "direct";
});

const bytesOf = (e: Envelope) => new TextEncoder().encode(JSON.stringify(e));

/** Enrolled through the CLI (the code on standard input), the node's `run` started; `stop()` must exit 0. */
async function holding(node: string) {
  const { code } = await mesh.enrolmentCode(node);
  const { state, root } = await enrolAt(`${code}\n`, tempDir());
  const start = (): Running => startRun(state, root, ["--drift-s", "600"]);
  const host = { run: start() };
  const report = async (n: number) => (await mesh.awaitReport(n, { node })).value!;
  return { state, root, host, start, report, conf: () => readFileSync(join(root, "etc/app.conf"), "utf8") };
}

describe("the signed order over the link", () => {
  it("a replay of v1's exact bytes after v2 is refused, naming both serials, and changes nothing", async () => {
    const node = "order-replay";
    const n = await holding(node);
    try {
      const v1 = bytesOf(mesh.sign(node, decl(node, "v1\n")));
      const v2 = bytesOf(mesh.sign(node, decl(node, "v2\n")));
      await mesh.publishEnvelope(node, v1);
      expect((await n.report(1)).outcome).toBe("applied");
      await mesh.publishEnvelope(node, v2);
      expect((await n.report(2)).outcome).toBe("applied");
      expect(n.conf()).toBe("v2\n");
      const before = snapshot(n.root);
      const kept = [readFileSync(join(n.state, "declared.json")), readFileSync(join(n.state, "order.json"))];
      await mesh.publishEnvelope(node, v1);
      const replayed = await n.report(3);
      expect(replayed.outcome).toBe("refused");
      expect(replayed.refusals).toEqual([
        { id: "declaration", field: "serial", reason: "serial 1 is older than 2, the newest accepted" },
      ]);
      expect(replayed.steps).toEqual([]);
      expect(snapshot(n.root)).toEqual(before);
      expect(readFileSync(join(n.state, "declared.json"))).toEqual(kept[0]);
      expect(readFileSync(join(n.state, "order.json"))).toEqual(kept[1]);
      // terminated, never read again: settled as the last on its subject
      const settled = JSON.parse(readFileSync(join(n.state, "settled.json"), "utf8"));
      expect(settled.meshes[mesh.meshKey.publicB64].seq).toBe((await mesh.declared(node)).lastSeq);
    } finally {
      expect(await n.host.run.stop()).toBe(0);
    }
    // the node restarted still holds v2, and applies nothing older
    expect(n.conf()).toBe("v2\n");
  });

  it("a redelivery (the same serial, the same body) is applied again and reported applied", async () => {
    const node = "order-again";
    const n = await holding(node);
    try {
      const v1 = bytesOf(mesh.sign(node, decl(node, "v1\n")));
      await mesh.publishEnvelope(node, v1);
      expect((await n.report(1)).outcome).toBe("applied");
      writeFileSync(join(n.root, "etc/app.conf"), "changed by hand\n");
      await mesh.publishEnvelope(node, v1);
      const again = await n.report(2);
      expect(again.outcome).toBe("applied");
      expect(again.steps[0]).toMatchObject({ id: "conf", did: "repaired" });
      expect(n.conf()).toBe("v1\n");
    } finally {
      expect(await n.host.run.stop()).toBe(0);
    }
  });

  it("a node killed mid-apply finishes the same declaration when it is redelivered", async () => {
    const node = "order-killed";
    const n = await holding(node);
    // busy until the kill, however slow the machine: the action ends once the gate exists
    const gate = join(tempDir(), "gate");
    const slow = {
      ...decl(node, "slow\n"),
      resources: [
        ...decl(node, "slow\n").resources,
        { id: "wait", type: "action", run: untilFileArgv(gate), on: ["conf"] },
      ],
    };
    const seq = await mesh.declare(node, slow);
    const written = () => {
      try {
        return n.conf() === "slow\n";
      } catch {
        return false;
      }
    };
    await waitFor(written, EVENT_WAIT_MS, "the first apply to begin");
    await n.host.run.stop("SIGKILL");
    writeFileSync(gate, "");
    const again = n.start();
    try {
      // the kept declaration at start, then the redelivered message: the same serial and body, applied again
      const reports = [await n.report(1), await n.report(2)];
      expect(reports.map((r) => [r.declaration.seq, r.outcome])).toEqual([
        [seq, "applied"],
        [seq, "applied"],
      ]);
      const settled = JSON.parse(readFileSync(join(n.state, "settled.json"), "utf8"));
      expect(settled.meshes[mesh.meshKey.publicB64].seq).toBe(seq);
    } finally {
      expect(await again.stop()).toBe(0);
    }
  });

  it("the same serial with another body, and a declaration without its order, are refused and change nothing", async () => {
    const node = "order-forked";
    const n = await holding(node);
    try {
      await mesh.declare(node, decl(node, "v1\n", { serial: 5 }));
      expect((await n.report(1)).outcome).toBe("applied");
      await mesh.declare(node, decl(node, "other\n", { serial: 5 }));
      expect(await n.report(2)).toMatchObject({
        outcome: "refused",
        refusals: [
          {
            field: "serial",
            reason: "serial 5 was accepted already with another body: the mesh signs each once",
          },
        ],
      });
      // exact text: the double adds no order to it (nor its address: given here, so the order is what is judged)
      const to = mesh.identityB64(node);
      await mesh.declare(node, JSON.stringify({ ...decl(node, "unordered\n"), to }));
      expect((await n.report(3)).refusals).toEqual([
        { id: "declaration", field: "serial", reason: "is required of a declaration from the mesh" },
      ]);
      await mesh.declare(node, JSON.stringify({ ...decl(node, "untimed\n", { serial: 9 }), to }));
      expect((await n.report(4)).refusals[0]).toMatchObject({ field: "issued_at" });
      expect(n.conf()).toBe("v1\n");
      // no expiry: a declaration signed long ago, but newer in order, is taken
      await mesh.declare(node, decl(node, "v6\n", { serial: 6, issued_at: "2001-01-01T00:00:00Z" }));
      expect((await n.report(5)).outcome).toBe("applied");
      expect(n.conf()).toBe("v6\n");
    } finally {
      expect(await n.host.run.stop()).toBe(0);
    }
  });
});

describe("a file given to apply or plan", () => {
  it("is never judged by its serial", async () => {
    const base = tempDir();
    const root = join(base, "root");
    mkdirSync(root);
    const file = join(base, "d.json");
    const cli = (cmd: string) => runCli([cmd, file, "--state", join(base, "state"), "--root", root]);
    writeFileSync(
      file,
      JSON.stringify(decl("offline", "nine\n", { serial: 9, issued_at: "2026-01-05T10:00:00Z" })),
    );
    expect((await cli("apply")).code).toBe(0);
    writeFileSync(file, JSON.stringify(decl("offline", "two\n", { serial: 2 })));
    expect((await cli("plan")).code).toBe(0);
    const applied = await cli("apply");
    expect(applied.code, applied.stderr).toBe(0);
    expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("two\n");
  });
});
