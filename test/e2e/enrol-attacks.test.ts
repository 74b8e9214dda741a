// Issue 28, items 2 and 3, against the real controller: `mesh init`, `mesh up` and the nodes through the built
// executable. (test/e2e/bus-attacks.test.ts tries the same reply tricks against the mesh double's answerer; here it
// is `mesh up`'s own.)
// - item 2: the enrolment answer was published, with the controller's rights, to the `reply` the question
//   carried: with an unspent code it purged REPORTS and overwrote another node's declaration. Now a question naming
//   any reply but its own enrolment inbox spends nothing, is not answered, and is said by `mesh up`.
// - item 3: a code worked until the node was first heard: a later enrolment with it replaced the recorded keys, and
//   the real node could no longer open its secrets. Now a spent code, or a removed node's, is refused, the recorded
//   keys stay, and a secret pushed after still opens on the real node.
import { sign } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENROL_PER_NODE } from "../../src/defaults.ts";
import { MeshDir, serviceAuthenticator } from "../../src/mesh/index.ts";
import { makeKeys, publicKeys } from "../../src/store/index.ts";
import { decodeCode, keyPairOfSeed, nkeyOf } from "../../src/vocabulary/index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { codeRecord, nodeRecord } from "../mesh/state.ts";
import { type Running, runCli, startRun } from "../support/cli.ts";
import { ensureSea } from "../support/sea.ts";

const WAIT = ["--wait-s", "120"];
const running: Running[] = [];
let base: string;
let dir: string;
let up: Running;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  // kept for the whole file (tempDir's go after each test)
  base = mkdtempSync(join(tmpdir(), "enrol-attacks-"));
  dir = join(base, "mesh");
  await initMesh(dir, await freePortPairs(1));
  up = await meshUp(dir);
  running.push(up);
}, 600_000);
afterAll(async () => {
  while (running.length) await running.pop()!.stop();
  rmSync(base, { recursive: true, force: true });
});

function file(name: string, value: object): string {
  const path = join(base, name);
  writeFileSync(path, JSON.stringify(value));
  return path;
}

async function enrolled(name: string, code: string): Promise<{ state: string; root: string; run: Running }> {
  const state = join(base, name, "state");
  const root = join(base, name, "root");
  mkdirSync(root, { recursive: true });
  const enrol = await runCli(["enrol", "--state", state, "--root", root], { input: code });
  expect(enrol.code, enrol.stderr).toBe(0);
  const run = startRun(state, root);
  running.push(run);
  await awaitOutput(run, (o) => o.stderr.includes('"link up"'), `${name}'s link up`);
  return { state, root, run };
}

/** A connection as the mesh's own user: to read the streams the attack aims at. */
async function asMesh(): Promise<NatsConnection> {
  const m = new MeshDir(dir);
  return await connect({
    servers: m.urls(),
    authenticator: serviceAuthenticator(m.accountKeys(), "mesh", "test"),
    tls: { ca: m.certPem() },
  });
}

/** Signed in as the code's enrolling user, exactly as `enrol` would, listening where it may. */
async function asEnrolling(code: string): Promise<NatsConnection> {
  const decoded = decodeCode(code);
  if (!decoded.ok || !("jwt" in decoded.value)) throw new Error("not a v2 code");
  const { jwt, seed, node } = decoded.value;
  const pair = keyPairOfSeed("user", seed)!;
  const nkey = nkeyOf("user", pair.publicKey);
  const m = new MeshDir(dir);
  return await connect({
    servers: m.urls(),
    authenticator: (nonce?: string) => ({
      jwt,
      nkey,
      sig: sign(null, Buffer.from(nonce ?? ""), pair.privateKey).toString("base64url"),
    }),
    inboxPrefix: `_INBOX.enrol.${node}`,
    tls: { ca: m.certPem() },
  });
}

describe("the controller answers an enrolment only at the question's own inbox (issue 28, item 2)", () => {
  it("a question naming the JetStream API or another node's declaration as its reply spends nothing, changes nothing, is said", async () => {
    const added = await mesh(dir, ["node", "add", "b"]);
    expect(added.code, added.stderr).toBe(0);
    const b = await enrolled("b", added.stdout);
    const pushed = await mesh(dir, [
      "push",
      "b",
      file("b.json", {
        v: 1,
        mode: "converged",
        resources: [{ id: "f", type: "file", path: "/etc/b", content: "b\n" }],
      }),
      ...WAIT,
    ]);
    expect(pushed.code, pushed.stderr).toBe(0);
    await b.run.stop();
    const nc = await asMesh();
    const jsm = await jetstreamManager(nc);
    const reports = (await jsm.streams.info("REPORTS")).state.messages;
    const bDeclared = (await jsm.streams.getMessage("DECLARE", { last_by_subj: "mesh.declare.b" }))!.seq;
    expect(reports).toBeGreaterThan(0);

    const code = await mesh(dir, ["node", "add", "a"]);
    expect(code.code, code.stderr).toBe(0);
    const asker = await asEnrolling(code.stdout);
    const replies = ["$JS.API.STREAM.PURGE.REPORTS", "mesh.declare.b", "$JS.API.STREAM.DELETE.DECLARE"];
    for (const reply of replies) {
      const question = {
        v: 1,
        node: "a",
        reply,
        keys: publicKeys(makeKeys()),
        facts: { os: "linux", arch: "x64", hostname: "h", version: "0" },
      };
      asker.publish("mesh.enrol.a", JSON.stringify(question));
    }
    await asker.flush();
    const said = (o: { stderr: string }) =>
      o.stderr.split("\n").filter((l) => l.includes("not its enrolment inbox: refused, unanswered"));
    // said once for the node (the log is kept to a line a minute per kind and node: a flood of them is one line)
    await awaitOutput(up, (o) => said(o).length >= 1, "mesh up saying the refused question");
    expect(said(up.output()).join("\n")).toContain("$JS.API.STREAM.PURGE.REPORTS");
    await asker.close();
    expect((await jsm.streams.info("REPORTS")).state.messages).toBe(reports);
    expect((await jsm.streams.getMessage("DECLARE", { last_by_subj: "mesh.declare.b" }))!.seq).toBe(
      bDeclared,
    );
    expect((await jsm.streams.names().next()).sort()).toContain("DECLARE");
    await nc.close();
    // nothing was spent: the code still enrols the real node
    expect(await codeRecord(dir, "a")).not.toBeNull();
    expect((await nodeRecord(dir, "a")).keys).toBeNull();
    await enrolled("a", code.stdout);
  });
});

describe("a code works once (issue 28, item 3)", () => {
  it("a spent code used again, and a removed node's, are refused; the recorded keys stay; the node's secrets still open", async () => {
    const added = await mesh(dir, ["node", "add", "c"]);
    expect(added.code, added.stderr).toBe(0);
    const c = await enrolled("c", added.stdout);
    const keys = (await nodeRecord(dir, "c")).keys;
    // the thief: another machine, the same code, later
    const thief = join(base, "thief");
    mkdirSync(join(thief, "root"), { recursive: true });
    const again = await runCli(["enrol", "--state", join(thief, "state"), "--root", join(thief, "root")], {
      input: added.stdout,
    });
    expect(again.code, again.stderr).toBe(2);
    expect(again.stderr).toMatch(
      /code has been used|has no enrolment code|wrong, already used, expired or withdrawn/,
    );
    expect((await nodeRecord(dir, "c")).keys).toEqual(keys);
    // a secret pushed now is sealed to the real node's key: it opens there
    const secret = join(base, "pw");
    writeFileSync(secret, "s3cret-Jq4\n");
    const decl = file("c.json", {
      v: 1,
      mode: "converged",
      resources: [{ id: "pw", type: "file", path: "/etc/pw", secret: "pw", mode: "0600" }],
    });
    const pushed = await mesh(dir, ["push", "c", decl, "--secret", `pw=${secret}`, ...WAIT]);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(readFileSync(join(c.root, "etc/pw"), "utf8")).toBe("s3cret-Jq4");

    // a removed node's unspent code
    const gone = await mesh(dir, ["node", "add", "gone"]);
    expect(gone.code, gone.stderr).toBe(0);
    expect((await mesh(dir, ["node", "rm", "gone"])).code).toBe(0);
    mkdirSync(join(base, "gone", "root"), { recursive: true });
    const late = await runCli(
      ["enrol", "--state", join(base, "gone", "state"), "--root", join(base, "gone", "root")],
      { input: gone.stdout },
    );
    expect(late.code, late.stderr).toBe(2);
    expect(late.stderr).toMatch(
      /wrong, already used, expired or withdrawn|not in this mesh|no enrolment code/,
    );
  });
});

// The node asks again every ENROL_ASK_AGAIN_MS while unanswered (protocol.md "Codes are spent once"): a code's
// holder may do the same as fast as it likes. The bus keeps ENROL_PER_NODE of its questions, the code is spent once,
// to the first keys, and another node's enrolment goes on being answered.
describe("a code's holder asking over and over (issue 28, item 3; the re-ask as the least trusted node)", () => {
  it(`keeps at most ${ENROL_PER_NODE} of its questions on the bus, spends the code once, and holds up no one else`, async () => {
    const added = await mesh(dir, ["node", "add", "loud"]);
    expect(added.code, added.stderr).toBe(0);
    const nc = await asEnrolling(added.stdout);
    const js = jetstream(nc);
    const keys = publicKeys(makeKeys());
    const question = (i: number) =>
      JSON.stringify({
        v: 1,
        node: "loud",
        reply: `_INBOX.enrol.loud.${i}`,
        // the first asks with `keys`, every later one with keys of its own: only the first may be recorded
        keys: i === 0 ? keys : publicKeys(makeKeys()),
        facts: { os: "linux", arch: "x64", hostname: "loud", version: "0.0.0" },
      });
    await js.publish("mesh.enrol.loud", question(0));
    const flood = [];
    for (let i = 1; i <= 200; i++) flood.push(js.publish("mesh.enrol.loud", question(i)).catch(() => null));
    await Promise.all(flood);

    const calm = await mesh(dir, ["node", "add", "calm"]);
    expect(calm.code, calm.stderr).toBe(0);
    await enrolled("calm", calm.stdout);

    const m = await asMesh();
    const info = await jetstreamManager(m).then((jsm) =>
      jsm.streams.info("ENROL", { subjects_filter: "mesh.enrol.loud" }),
    );
    expect(info.state.subjects?.["mesh.enrol.loud"] ?? 0).toBeLessThanOrEqual(ENROL_PER_NODE);
    await m.close();
    await nc.close().catch(() => undefined);
    expect((await nodeRecord(dir, "loud")).keys).toEqual(keys);
    expect((await nodeRecord(dir, "calm")).keys).toBeDefined();
  });
});
