// Issue 28, items 4 and 5, attacked as the issue found them, through the built executable against the real
// nats-servers `mesh init` / `mesh up` run:
// - a name's earlier life: `node rm` + `node add` of the same name restarts its serials under the same mesh
//   key, so an envelope captured before (serial 2) would roll the re-enrolled node back. Declarations are
//   addressed (`to`, the node's identity key): it is refused, and the file stays.
// - a report or heartbeat believed by its subject: one published on `mesh.report.b` by someone else (here the
//   mesh's own user, the widest credential there is) is dropped and counted, never shown as b's.
import { generateKeyPairSync } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishDeclaration } from "../../src/mesh/index.ts";
import { type Report, SignedMessage, signMessage } from "../../src/vocabulary/index.ts";
import { appConf, asController, type LinkedNode, TestMesh } from "../mesh/fleet.ts";
import { awaitOutput, mesh } from "../mesh/operator.ts";
import { nodeRecord } from "../mesh/state.ts";
import { type Running, startCli } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

const WAIT = ["--wait-s", "120"];
let m: TestMesh;

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);
const keep = (r: Running) => m.keep(r);

type Node = LinkedNode;

/** `mesh node add`, `enrol` (the code on stdin) into a fresh state directory, `run` until its link is up. */
const enrolled = (name: string, life: string): Promise<Node> => m.node(name, { at: join(name, life) });

async function push(dir: string, base: string, node: string, content: string): Promise<void> {
  const path = join(base, `${node}-${content.trim()}.json`);
  writeFileSync(path, JSON.stringify(appConf(content)));
  const r = await mesh(dir, ["push", node, path, ...WAIT]);
  expect(r.code, `${r.stdout}${r.stderr}`).toBe(0);
}

/** The node's reports in REPORTS after stream sequence `after`, their bodies parsed (signed or not). */
async function reportsAfter(nc: NatsConnection, node: string, after: number): Promise<Report[]> {
  const jsm = await jetstreamManager(nc);
  const out: Report[] = [];
  const last = (await jsm.streams.info("REPORTS")).state.last_seq;
  for (let seq = after + 1; seq <= last; seq++) {
    const m = await jsm.streams.getMessage("REPORTS", { seq }).catch(() => null);
    if (!m || m.subject !== `mesh.report.${node}`) continue;
    const signed = SignedMessage.safeParse(JSON.parse(Buffer.from(m.data).toString("utf8")));
    if (signed.success) out.push(JSON.parse(signed.data.body) as Report);
  }
  return out;
}

async function until<T>(get: () => Promise<T | null | undefined>, what: string, ms = 120_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await get();
    if (got !== null && got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("issue 28 item 4: a name's earlier life", () => {
  let base: string;
  let dir: string;
  beforeAll(async () => {
    m = await TestMesh.start("mesh-signed-");
    ({ base, dir } = m);
  }, 300_000);
  afterAll(async () => {
    await m?.stop();
  });

  it("node rm + node add, re-enrolled: an envelope of the name's previous life (serial 2) is refused, the file not rolled back", async () => {
    const first = await enrolled("web", "first");
    await push(dir, base, "web", "one\n");
    await push(dir, base, "web", "two\n");
    const nc = await asController(dir);
    try {
      const jsm = await jetstreamManager(nc);
      // captured: the exact bytes of the name's serial 2, as anyone who can read the stream could
      const captured = await jsm.streams.getMessage("DECLARE", { last_by_subj: "mesh.declare.web" });
      const oldBody = JSON.parse(SignedEnvelopeBody(captured!.data));
      expect(oldBody).toMatchObject({ serial: 2, node: "web" });
      expect(await first.run.stop()).toBe(0);

      expect((await mesh(dir, ["node", "rm", "web"])).code).toBe(0);
      // the same name, a new machine: new keys, and the mesh's serials for it start again at 1
      const second = await enrolled("web", "second");
      await push(dir, base, "web", "new life\n");
      const record = await nodeRecord(dir, "web");
      expect(record.serial).toBe(1);
      expect(oldBody.to).not.toBe(record.keys!.identity);
      expect(readFileSync(join(second.root, "etc/app.conf"), "utf8")).toBe("new life\n");

      const before = (await jsm.streams.info("REPORTS")).state.last_seq;
      // replayed as the bus would carry a push: stored, then woken
      const seq = (await publishDeclaration({ js: jetstream(nc), nc }, "web", captured!.data)).seq;
      const refused = await until(
        async () => (await reportsAfter(nc, "web", before)).find((r) => r.declaration.seq === seq),
        "the node's report of the replayed envelope",
      );
      expect(refused.outcome).toBe("refused");
      expect(refused.steps).toEqual([]);
      expect(refused.refusals).toEqual([
        {
          id: "declaration",
          field: "to",
          reason: expect.stringMatching(
            /^is addressed to identity key .*not this node's .*earlier enrolment/,
          ),
        },
      ]);
      expect(readFileSync(join(second.root, "etc/app.conf"), "utf8")).toBe("new life\n");
      // its order did not move: the next push of the new life is serial 2, and it applies
      await push(dir, base, "web", "next\n");
      expect(readFileSync(join(second.root, "etc/app.conf"), "utf8")).toBe("next\n");
    } finally {
      await nc.close();
    }
  });
});

/** The body string of a signed envelope's bytes. */
function SignedEnvelopeBody(data: Uint8Array): string {
  return (JSON.parse(Buffer.from(data).toString("utf8")) as { body: string }).body;
}

describe("issue 28 item 5: reports and heartbeats are the node's only when it signed them", () => {
  let base: string;
  let dir: string;
  let up: Running;
  let b: Node;
  beforeAll(async () => {
    m = await TestMesh.start("mesh-signed-");
    ({ base, dir, up } = m);
    await enrolled("a", "only");
    b = await enrolled("b", "only");
    await push(dir, base, "b", "real\n");
  }, 300_000);
  afterAll(async () => {
    await m?.stop();
  });

  it("a forged report and heartbeat on b's subjects are dropped and counted, never shown as b's", async () => {
    const nodes = async () =>
      (JSON.parse((await mesh(dir, ["nodes", "--json"])).stdout) as { nodes: Row[] }).nodes;
    const bBefore = (await nodes()).find((r) => r.node === "b")!;
    expect(bBefore).toMatchObject({ unverified_dropped: 0, report: { outcome: "applied", serial: 1 } });
    const watch = keep(startCli(["mesh", "--mesh", dir, "watch", "--json"]));
    await awaitOutput(watch, (o) => o.stderr.includes("following"), "watch following");

    const nc = await asController(dir);
    try {
      const liar = generateKeyPairSync("ed25519").privateKey;
      const report: Report = {
        v: 1,
        node: "b",
        declaration: { seq: 999, digest: "f".repeat(64) },
        outcome: "failed",
        started_at: new Date().toISOString(),
        finished_at: new Date().toISOString(),
        steps: [{ id: "forged", type: "file", did: "failed", detail: "forged by someone else" }],
        holds: [],
        refusals: [],
        host: { version: "forged-version", os: "arch" },
      };
      const heartbeat = {
        v: 1,
        node: "b",
        at: new Date().toISOString(),
        version: "forged-version",
        uptime_s: 1,
        last: null,
        confirmed: false,
      };
      const js = jetstream(nc);
      // signed by another key, and unsigned as v1 sent them: neither is b's
      await js.publish("mesh.report.b", JSON.stringify(signMessage(report, liar)));
      await js.publish("mesh.report.b", JSON.stringify(report));
      nc.publish("mesh.heartbeat.b", JSON.stringify(signMessage(heartbeat, liar)));
      nc.publish("mesh.heartbeat.b", JSON.stringify(heartbeat));
      await nc.flush();

      const counted = await until(async () => {
        const row = (await nodes()).find((r) => r.node === "b");
        return row && row.unverified_dropped >= 4 ? row : null;
      }, "b's four drops in mesh nodes --json");
      expect(counted.unverified_dropped).toBe(4);
      expect(counted.report).toMatchObject({ outcome: "applied", serial: 1 });
      expect(counted.version).not.toBe("forged-version");
      expect((await nodes()).find((r) => r.node === "a")!.unverified_dropped).toBe(0);
      // b's own heartbeats still count as b's: one arrives after the forgeries, and the forged never showed
      const lines = () => watch.output().stdout.split("\n").filter(Boolean);
      const seen = lines().length;
      await awaitOutput(
        watch,
        () =>
          lines()
            .slice(seen)
            .some((l) => l.includes('"kind":"heartbeat"') && l.includes('"node":"b"')),
        "b's own heartbeat after the forgeries",
      );
      expect(watch.output().stdout).not.toContain("forged");
      const text = await mesh(dir, ["nodes"]);
      expect(text.stdout).toContain("b: 4 message(s) dropped, not signed by its identity key");
      expect(text.stdout).not.toContain("forged");
      // said in up's log at once, naming the node and why; the same again within a minute only counted
      const said = up
        .output()
        .stderr.split("\n")
        .filter((l) => l.includes("on b's subject, not signed"));
      expect(said.filter((l) => l.includes("dropped a report"))).toHaveLength(1);
      expect(said.filter((l) => l.includes("dropped a heartbeat"))).toHaveLength(1);
      expect(said.join("\n")).toMatch(/the signature does not verify against b's enrolled identity key/);
    } finally {
      await nc.close();
    }
  }, 400_000);

  it("a forged report of the very declaration pushed is no answer to the push", async () => {
    expect(await b.run.stop()).toBe(0);
    const path = join(base, "waited.json");
    writeFileSync(path, JSON.stringify(appConf("waited\n")));
    const pushing = keep(startCli(["mesh", "--mesh", dir, "push", "b", path, "--wait-s", "20", "--json"]));
    const nc = await asController(dir);
    try {
      const jsm = await jetstreamManager(nc);
      // the forger reads what was pushed, and answers for b before b can
      const body = await until(async () => {
        const m = await jsm.streams
          .getMessage("DECLARE", { last_by_subj: "mesh.declare.b" })
          .catch(() => null);
        const text = m ? SignedEnvelopeBody(m.data) : null;
        return text?.includes("waited") ? { text, seq: m!.seq } : null;
      }, "the pushed declaration on the stream");
      const { createHash } = await import("node:crypto");
      const digest = createHash("sha256").update(body.text).digest("hex");
      const forged: Report = {
        v: 1,
        node: "b",
        declaration: { seq: body.seq, digest },
        outcome: "applied",
        started_at: new Date().toISOString(),
        finished_at: new Date().toISOString(),
        steps: [],
        holds: [],
        refusals: [],
        host: { version: "forged", os: "arch" },
      };
      await jetstream(nc).publish(
        "mesh.report.b",
        JSON.stringify(signMessage(forged, generateKeyPairSync("ed25519").privateKey)),
      );
      const code = await pushing.exited;
      // no report within the wait: exit 3, and nothing of the forgery in what it printed
      expect(code).toBe(3);
      const doc = JSON.parse(pushing.output().stdout);
      expect(doc.nodes[0]).toMatchObject({ node: "b", report: null });
    } finally {
      await nc.close();
    }
  }, 200_000);
});

interface Row {
  node: string;
  version: string | null;
  unverified_dropped: number;
  report: { outcome: string; serial: number | null } | null;
}
