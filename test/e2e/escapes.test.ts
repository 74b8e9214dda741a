// Issue 28 item 6, attacked as the issue found it: a node's heartbeat `version` and a report's step id, type,
// detail and refusals reached `mesh nodes`, `mesh watch` and `mesh push` raw — clear-screen, colour, title and
// hyperlink sequences all obeyed by the operator's terminal. The node here is hostile: whoever holds its state
// directory holds its identity key, so what it says is signed and is its own; it must still be shown escaped.
// Through the built executable, against the real nats-server `mesh up` runs; `--json` stays exact JSON.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Link, openBound } from "../../src/link/index.ts";
import { loadIdentity, State } from "../../src/store/index.ts";
import { type Report, verifyEnvelope } from "../../src/vocabulary/index.ts";
import { addNode, enrolAt, TestMesh } from "../mesh/fleet.ts";
import { awaitOutput, mesh } from "../mesh/operator.ts";
import { startCli, startRun } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

/** Clear screen and home, colour, an OSC title (BEL-ended), an OSC 8 hyperlink (ST-ended), a bidi override, a C1 CSI. */
const HOSTILE =
  "\x1b[2J\x1b[H\x1b[31mred\x1b[0m\x1b]0;pwned\x07\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\u202etxt.exe\u009b31m";
/** What a terminal must never be sent from a node: every control character but the line ends we print. */
const RAW =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const ESCAPED = [
  "\\x1b[2J",
  "\\x1b[31mred",
  "\\x1b]0;pwned\\x07",
  "\\x1b]8;;https://evil.example/\\x1b\\click",
  "\\u202etxt.exe",
  "\\x9b31m",
];

let m: TestMesh;
let base: string;
let dir: string;
let link: Link;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("mesh-escapes-");
  ({ base, dir } = m);
  const { state, root } = await enrolAt(await addNode(dir, "evil"), base);
  // heard once as itself (its token spent), then its own `run` stopped: from here on it speaks for itself
  const run = startRun(state, root);
  await awaitOutput(
    run,
    (o) => o.stderr.includes("heartbeat sent") || o.stderr.includes('"link up"'),
    "link up",
  );
  expect(await run.stop()).toBe(0);
  const identity = loadIdentity(state);
  if (!identity.ok) throw new Error(identity.reason);
  link = await boundAs(state, identity.pair.privateKey);
}, 600_000);

afterAll(async () => {
  await link?.close();
  await m?.stop();
});

function clean(text: string): void {
  expect(text).not.toMatch(RAW);
  for (const e of ESCAPED) expect(text).toContain(e);
}

describe("what a node says reaches the operator's terminal escaped", () => {
  it("mesh push, mesh watch and mesh nodes print a hostile node's words escaped; --json stays exact", async () => {
    const watchText = startCli(["mesh", "--mesh", dir, "watch"]);
    const watchJson = startCli(["mesh", "--mesh", dir, "watch", "--json"]);
    m.keep(watchText);
    m.keep(watchJson);
    for (const w of [watchText, watchJson])
      await awaitOutput(w, (o) => o.stderr.includes("following"), "watch");

    const sent = link.heartbeat({
      v: 1,
      node: "evil",
      at: new Date().toISOString(),
      version: HOSTILE,
      uptime_s: 1,
      last: { seq: 1, outcome: HOSTILE, at: new Date().toISOString() },
      confirmed: true,
    });
    expect(sent).toEqual({ ok: true });

    const file = join(base, "d.json");
    writeFileSync(file, JSON.stringify({ v: 1, mode: "converged", owns_nothing: true, resources: [] }));
    const pushing = startCli(["mesh", "--mesh", dir, "push", "evil", file, "--wait-s", "120"]);
    m.keep(pushing);
    // the node answers the push with a report it wrote itself
    const iterator = link.declarations()[Symbol.asyncIterator]();
    const next = await Promise.race([
      iterator.next(),
      new Promise<null>((r) => setTimeout(() => r(null), 120_000)),
    ]);
    if (!next || next.done) throw new Error(`no declaration came: ${JSON.stringify(pushing.output())}`);
    const delivered = next.value;
    const membership = new State(join(base, "state")).readMembership()!;
    const verified = verifyEnvelope(delivered.data, { meshKey: membership.mesh_key, node: "evil" });
    expect(verified.ok).toBe(true);
    expect(await delivered.ack()).toEqual({ ok: true });
    const now = new Date().toISOString();
    const report: Report = {
      v: 1,
      node: "evil",
      declaration: { seq: delivered.seq, digest: verified.digest },
      outcome: "applied",
      started_at: now,
      finished_at: now,
      steps: [{ id: HOSTILE, type: HOSTILE, did: "created", detail: HOSTILE }],
      holds: [],
      refusals: [{ id: HOSTILE, field: HOSTILE, reason: HOSTILE }],
      host: { version: HOSTILE, os: "arch" },
    };
    expect(await link.report(report)).toMatchObject({ ok: true });

    expect(await pushing.exited).toBe(0);
    clean(pushing.output().stdout);
    expect(pushing.output().stdout).toContain(`refused: ${ESCAPED[0]}`);

    await awaitOutput(watchText, (o) => o.stdout.includes(" report evil "), "the report in mesh watch");
    await awaitOutput(watchText, (o) => o.stdout.includes(" heartbeat evil "), "the heartbeat in mesh watch");
    clean(watchText.output().stdout);
    await awaitOutput(
      watchJson,
      (o) => o.stdout.includes('"kind":"report"'),
      "the report in mesh watch --json",
    );
    const events = watchJson
      .output()
      .stdout.trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(events.find((e) => e.kind === "report").report.steps[0]).toEqual(report.steps[0]);
    expect(events.find((e) => e.kind === "heartbeat")?.heartbeat.version).toBe(HOSTILE);

    const deadline = Date.now() + 120_000;
    let rows: { node: string; version: string | null }[] = [];
    while (Date.now() < deadline) {
      rows = JSON.parse((await mesh(dir, ["nodes", "--json"])).stdout).nodes;
      if (rows[0]?.version === HOSTILE) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    // exact in JSON: what the node said, to the byte
    expect(rows[0]).toMatchObject({ node: "evil", version: HOSTILE });
    const table = await mesh(dir, ["nodes"]);
    expect(table.stdout).not.toMatch(RAW);
    expect(table.stdout).toContain("\\x1b[2J\\x1b[H\\x1b[31mred");
  }, 400_000);
});

/** The node's own link, opened as its `run` would: signed in with its identity key, no reload to dodge. */
async function boundAs(state: string, identity: Parameters<typeof openBound>[2]): Promise<Link> {
  const opened = await openBound(new State(state).readMembership()!, "evil", identity);
  if (!opened.ok) throw new Error(opened.reason);
  return opened.link;
}
