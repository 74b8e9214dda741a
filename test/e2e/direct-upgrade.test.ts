// A mesh raised before direct reads (protocol.md "Direct reads"), brought up by this release's `mesh up`: its servers
// held MESH's and NODES' claims without direct reads' exports and imports (and NODES' revocations of a node removed);
// `mesh up` pushes this release's claims, keeping those revocations, and a node enrolled then reads directly: it is
// woken by a push, with no consumer of its own on the bus.
import { generateKeyPairSync } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AckPolicy } from "@nats-io/jetstream";
import { describe, expect, it, onTestFailed } from "vitest";
import { ACCOUNT_NAMES } from "../../src/mesh/accounts.ts";
import {
  accountId,
  accountJwt,
  connectBus,
  MeshDir,
  revocationsOnBus,
  shardOf,
  stateOf,
} from "../../src/mesh/index.ts";
import { claimsOf, issueJwt } from "../../src/mesh/jwt.ts";
import { nkeyOf } from "../../src/vocabulary/index.ts";
import { addNode, appConf, enrolAt, keptRuns, runLinkUp } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS } from "../mesh/index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshUp } from "../mesh/operator.ts";
import { runCli } from "../support/cli.ts";
import { tempDir } from "../support/tmp.ts";

const kept = keptRuns();

const DIRECT = /DIRECT\.GET\.DECLARE|^mesh\.(declare|wake)\.\*/;

/** The claims the servers hold of `kind`, decoded. */
async function held(dir: string, kind: "mesh" | "nodes"): Promise<{ exports: string[]; imports: string[] }> {
  const md = new MeshDir(dir);
  const sys = await connectBus(md, { system: true, name: "test (system)" });
  try {
    const id = accountId(md.accountKeys(), kind);
    const m = await sys.nc.request(`$SYS.REQ.ACCOUNT.${id}.CLAIMS.LOOKUP`, "", { timeout: 10_000 });
    const nats = (claimsOf(new TextDecoder().decode(m.data))?.nats ?? {}) as {
      exports?: { subject: string }[];
      imports?: { subject: string; local_subject?: string }[];
    };
    return {
      exports: (nats.exports ?? []).map((e) => e.subject),
      // an import heard under another subject, as "subject as local"
      imports: (nats.imports ?? []).map((i) =>
        i.local_subject ? `${i.subject} as ${i.local_subject}` : i.subject,
      ),
    };
  } finally {
    await sys.close();
  }
}

/**
 * The servers told an earlier release's claims: this release's, less direct reads' exports and imports, NODES'
 * revoking `user` (a node removed then, when every node was NODES').
 */
async function pushEarlierClaims(dir: string, user: string): Promise<void> {
  const md = new MeshDir(dir);
  const keys = md.accountKeys();
  const sys = await connectBus(md, { system: true, name: "test (system)" });
  try {
    const revoked = { users: { [user]: Math.floor(Date.now() / 1000) }, enrolling: [] };
    for (const kind of ["mesh", "nodes"] as const) {
      const claims = claimsOf(accountJwt(keys, kind, revoked))!;
      const nats = claims.nats as { exports?: { subject: string }[]; imports?: { subject: string }[] };
      nats.exports = nats.exports?.filter((e) => !DIRECT.test(e.subject));
      nats.imports = nats.imports?.filter((i) => !DIRECT.test(i.subject));
      const earlier = { ...claims, iat: Math.floor(Date.now() / 1000) } as Parameters<typeof issueJwt>[0];
      const jwt = issueJwt(earlier, keys.operator.privateKey, "operator");
      const answer = await sys.nc.request("$SYS.REQ.CLAIMS.UPDATE", jwt, { timeout: 10_000 });
      expect(new TextDecoder().decode(answer.data), ACCOUNT_NAMES[kind]).not.toContain('"error"');
    }
  } finally {
    await sys.close();
  }
}

describe("a mesh raised before direct reads", () => {
  it("is brought up by mesh up: its claims gain direct reads, NODES' revocations kept, and a node enrolled then is woken by a push", async () => {
    // where the time went, said if it fails: two clean-clone runs timed out here with nothing else said
    const from = Date.now();
    const steps: string[] = [];
    const step = (what: string) => steps.push(`${what} at ${((Date.now() - from) / 1000).toFixed(1)} s`);
    onTestFailed(() => {
      process.stderr.write(`direct-upgrade: ${steps.join("; ")}\n`);
    });
    const base = tempDir("direct-upgrade-");
    const dir = join(base, "mesh");
    await initMesh(dir, await freePortPairs(1));
    const first = kept.keep(await meshUp(dir));
    step("up");
    // a node removed: its revocation is in its shard's claims, and must stay there; one removed by the earlier
    // release is in NODES', and must stay there too
    await addNode(dir, "gone");
    const gone = await enrolAt(await addNode(dir, "gone-too"), join(base, "gone-too"));
    step("enrolled");
    expect((await mesh(dir, ["node", "rm", "gone-too"])).code).toBe(0);
    step("removed");
    const shard = shardOf("gone-too");
    const revokedBefore = Object.keys((await revocationsOnBus(new MeshDir(dir), shard)).users);
    expect(revokedBefore.length).toBeGreaterThan(0);
    const earlierUser = nkeyOf("user", generateKeyPairSync("ed25519").publicKey);
    await pushEarlierClaims(dir, earlierUser);
    expect((await held(dir, "mesh")).exports.filter((s) => DIRECT.test(s))).toEqual([]);
    step("earlier claims pushed");
    await first.stop();
    step("stopped");

    const up = kept.keep(await meshUp(dir));
    step("up again");
    await awaitOutput(
      up,
      (o) => o.stdout.includes("account's claims up to this release"),
      "the claims brought up",
    );
    step("claims brought up");
    // the wake-up, sent once the stream holds a declaration, is heard on the node's own subject; the publish's
    // own copy is exported to none
    expect((await held(dir, "mesh")).exports.filter((s) => DIRECT.test(s)).sort()).toEqual([
      "$JS.API.DIRECT.GET.DECLARE.mesh.declare.*",
      "mesh.wake.*",
    ]);
    expect((await held(dir, "nodes")).imports.filter((s) => DIRECT.test(s)).sort()).toEqual([
      "$JS.API.DIRECT.GET.DECLARE.mesh.declare.*",
      "mesh.wake.* as mesh.declare.*",
    ]);
    expect(Object.keys((await revocationsOnBus(new MeshDir(dir), shard)).users)).toEqual(
      expect.arrayContaining(revokedBefore),
    );
    expect(Object.keys((await revocationsOnBus(new MeshDir(dir), "NODES")).users)).toContain(earlierUser);
    expect(gone.state).toBeTruthy();

    const node = await enrolAt(await addNode(dir, "web-1"), join(base, "web-1"));
    step("web-1 enrolled");
    kept.keep(await runLinkUp(kept, node));
    step("web-1 linked");
    const file = join(base, "app.json");
    writeFileSync(file, JSON.stringify(appConf("direct\n")));
    const pushed = await mesh(dir, ["push", "web-1", file, "--wait-s", "120"]);
    expect(pushed.code, pushed.stderr).toBe(0);
    step("pushed");
    const bus = await connectBus(new MeshDir(dir));
    try {
      const names: string[] = [];
      for await (const c of bus.jsm.consumers.list("DECLARE")) names.push(c.name);
      expect(names).not.toContain("node-web-1");
    } finally {
      await bus.close();
    }
    // brought up once: a second start pushes nothing
    await up.stop();
    const again = kept.keep(await meshUp(dir));
    expect(again.output().stdout).not.toContain("account's claims up to this release");
    // a sum of steps each slow on a busy machine, none stuck: the deadline is the chaos tests'
  }, 900_000);

  it("drops the consumer of a node that read from one once it enrols again; one left behind goes at the next mesh up", async () => {
    const base = tempDir("consumer-left-");
    const dir = join(base, "mesh");
    await initMesh(dir, await freePortPairs(1));
    let up = kept.keep(await meshUp(dir));
    const names = ["again", "left", "kept"];
    const dirs = new Map<string, string>();
    for (const name of names) {
      await enrolAt(await addNode(dir, name), join(base, name));
      dirs.set(name, join(base, name));
    }
    const file = join(base, "app.json");
    writeFileSync(file, JSON.stringify(appConf("before\n")));
    const pushed = await mesh(dir, ["push", "left", file, "--wait-s", "0"]);
    expect(pushed.code, pushed.stderr).toBe(0);
    // as an earlier release left them: each with a consumer of its own; `again` and `kept` enrolled before the
    // shards (no account in their records), `left` enrolled again since, its consumer's drop failed
    // kept through the restart of `mesh up` (and its server) below
    const bus = await connectBus(new MeshDir(dir), { reconnect: true, name: "test" });
    const consumers = async () => {
      const all: string[] = [];
      for await (const c of bus.jsm.consumers.list("DECLARE")) all.push(c.name);
      return all.sort();
    };
    try {
      const state = stateOf(bus);
      for (const name of names) {
        await bus.jsm.consumers.add("DECLARE", {
          durable_name: `node-${name}`,
          filter_subject: `mesh.declare.${name}`,
          ack_policy: AckPolicy.Explicit,
        });
        if (name === "left") continue;
        const entry = (await state.nodes.get(name))!;
        const { account: _, ...earlier } = entry.value;
        await state.nodes.put(name, earlier);
      }
      expect(await consumers()).toEqual(["node-again", "node-kept", "node-left"]);

      const codeFile = join(base, "again.code");
      const reissued = await mesh(dir, ["node", "reissue", "again", "--code-file", codeFile]);
      expect(reissued.code, reissued.stderr).toBe(0);
      const state2 = join(dirs.get("again")!, "state");
      const root2 = join(dirs.get("again")!, "root");
      const enrolled = await runCli(["enrol", "--replace", "--state", state2, "--root", root2], {
        input: readFileSync(codeFile, "utf8"),
      });
      expect(enrolled.code, enrolled.stderr).toBe(0);
      // dropped once the answer was out: the enrolment has returned by then
      await awaitConsumers(consumers, ["node-kept", "node-left"]);
      expect((await state.nodes.get("again"))?.value.account).toBe(shardOf("again"));

      await up.stop();
      up = kept.keep(await meshUp(dir));
      // `left` reads directly: its consumer goes, its declaration stays; `kept` still reads from its own
      await awaitConsumers(consumers, ["node-kept"]);
      const last = await bus.jsm.streams.getMessage("DECLARE", { last_by_subj: "mesh.declare.left" });
      expect(last?.seq).toBeGreaterThan(0);
    } finally {
      await bus.close();
    }
  });
});

/** Until DECLARE's consumers are `want`, for up to EVENT_WAIT_MS. */
async function awaitConsumers(list: () => Promise<string[]>, want: string[]): Promise<void> {
  const deadline = Date.now() + EVENT_WAIT_MS;
  // a list asked while the connection is still finding the restarted server is asked again
  const listed = () => list().catch((e: Error) => [`(not listed: ${e.message})`]);
  let got = await listed();
  while (JSON.stringify(got) !== JSON.stringify(want) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    got = await listed();
  }
  expect(got).toEqual(want);
}
