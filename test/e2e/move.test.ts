// Moving an enrolled node to another bus, and never stranding it: two real nats-servers, different certificates and users.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { beginMove, loadKeys, publicKeys, State } from "../../src/store/index.ts";
import { type Membership, seal } from "../../src/vocabulary/index.ts";
import { enrolAt } from "../mesh/fleet.ts";
import { EVENT_WAIT_MS, MeshDouble } from "../mesh/index.ts";
import { runCli, startRun } from "../support/cli.ts";
import { tempDir } from "../support/tmp.ts";

let a: MeshDouble;
let b: MeshDouble;
beforeAll(async () => {
  [a, b] = await Promise.all([MeshDouble.start(), MeshDouble.start()]);
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
});

const file = (content: string) => ({ id: "conf", type: "file", path: "/etc/app.conf", content });
const decl = (node: string, content: string, extra: object = {}) => ({
  v: 1,
  node,
  mode: "converged",
  resources: [file(content)],
  ...extra,
});

async function enrolOnA(node: string) {
  const { code } = await a.enrolmentCode(node);
  const { state, root } = await enrolAt(code, tempDir(), { codeAs: "argument" });
  return { state, root };
}

/** The node's identity public key, as its store holds it: B issues the node's user for this key and addresses to it. */
function identityOf(state: string): string {
  const keys = loadKeys(state);
  if (!keys.ok) throw new Error(keys.reason);
  return publicKeys(keys.keys).identity;
}

function sealedTo(state: string, value: object): string {
  const keys = loadKeys(state);
  if (!keys.ok) throw new Error(keys.reason);
  return seal(Buffer.from(JSON.stringify(value)), publicKeys(keys.keys).sealing);
}

/** `run` until it exits by itself (a move exits 0), as the service manager would see it. */
async function runUntilExit(state: string, root: string, graceS = 600) {
  const host = startRun(state, root, ["--drift-s", "60", "--move-grace-s", String(graceS)]);
  // a bound on a run that never exits by itself, not a pace: it moves on events
  const timer = setTimeout(() => void host.stop("SIGKILL"), EVENT_WAIT_MS);
  const code = await host.exited;
  clearTimeout(timer);
  return { code, ...host.output() };
}

describe("moving a node to another bus", () => {
  it("applies, reports on A, saves B keeping A beside it, exits 0; restarted, it holds on B and discards A", async () => {
    const node = "mover";
    const { state, root } = await enrolOnA(node);
    const onB: Membership = await b.admit(node, { identity: identityOf(state) });
    await a.declare(node, decl(node, "on A\n", { membership: sealedTo(state, onB) }));
    const first = await runUntilExit(state, root);
    expect(first.code).toBe(0);
    const said = await a.awaitReport(1, { node });
    expect(said.value).toMatchObject({ outcome: "applied" });
    expect(JSON.parse(readFileSync(join(state, "membership.json"), "utf8")).membership.servers).toEqual([
      b.url,
    ]);
    expect(existsSync(join(state, "membership.previous.json"))).toBe(true);
    const status = await runCli(["status", "--state", state, "--root", root]);
    expect(status.stdout).toMatch(/move: +to nats:\/\/127\.0\.0\.1:\d+ since .*back to/);
    // restarted by the service manager: dials B
    const host = startRun(state, root);
    try {
      await b.declare(node, decl(node, "on B\n"));
      const onBReport = await b.awaitReport(1, { node });
      expect(onBReport.value).toMatchObject({ outcome: "applied" });
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("on B\n");
      expect(existsSync(join(state, "membership.previous.json"))).toBe(false);
      expect(existsSync(join(state, "move.json"))).toBe(false);
    } finally {
      await host.stop();
    }
  });

  it("returns to A when B refuses it within the grace, and says why on A", async () => {
    const node = "stranded";
    const { state, root } = await enrolOnA(node);
    // B's address with A's user JWT: B's servers trust no account of A's, so B refuses the sign-in
    const onB = await b.admit(node, { identity: identityOf(state) });
    const wrong = { ...onB, jwt: (a.membershipOf(node) as { jwt: string }).jwt };
    await a.declare(node, decl(node, "on A\n", { membership: sealedTo(state, wrong) }));
    expect((await runUntilExit(state, root, 2)).code).toBe(0);
    // restarted: tries B, is refused past the grace, goes back to A and exits to be restarted there
    const second = await runUntilExit(state, root, 2);
    expect(second.code).toBe(0);
    expect(JSON.parse(readFileSync(join(state, "membership.json"), "utf8")).membership.servers).toEqual([
      a.url,
    ]);
    const host = startRun(state, root);
    try {
      // the first report on A after the return carries the note of why
      const back = await a.awaitReport(2, { node });
      expect(back.value!.notes?.[0]).toMatch(
        // B's servers know no account of A's: they look for its issuer and time out, or refuse it outright
        /move to nats:\/\/.* failed: .*(authentication|did not answer).*returned to nats:\/\//i,
      );
      await a.declare(node, decl(node, "back on A\n"));
      expect((await a.awaitReport(3, { node })).value!.outcome).toBe("applied");
      expect(readFileSync(join(root, "etc/app.conf"), "utf8")).toBe("back on A\n");
    } finally {
      await host.stop();
    }
  });

  it("a restart mid-move (after the save, before the exit) ends on B", async () => {
    const node = "midmove";
    const { state, root } = await enrolOnA(node);
    const onA = JSON.parse(readFileSync(join(state, "membership.json"), "utf8")).membership;
    // the state a kill leaves right after the save: B is the identity, A kept beside it
    beginMove(new State(state), await b.admit(node, { identity: identityOf(state) }), onA);
    const host = startRun(state, root);
    try {
      await b.declare(node, decl(node, "on B\n"));
      expect((await b.awaitReport(1, { node })).value!.outcome).toBe("applied");
      expect(existsSync(join(state, "move.json"))).toBe(false);
    } finally {
      await host.stop();
    }
  });

  it("refuses a membership sealed to another node's key, and stays on A", async () => {
    const node = "sealed-wrong";
    const { state, root } = await enrolOnA(node);
    const other = await enrolOnA("someone-else");
    const onB = await b.admit(node, { identity: identityOf(state) });
    await a.declare(node, decl(node, "x\n", { membership: sealedTo(other.state, onB) }));
    const host = startRun(state, root);
    try {
      const r = await a.awaitReport(1, { node });
      expect(r.value).toMatchObject({
        outcome: "refused",
        refusals: [expect.objectContaining({ field: "membership" })],
      });
      expect(existsSync(join(root, "etc/app.conf"))).toBe(false);
      expect(JSON.parse(readFileSync(join(state, "membership.json"), "utf8")).membership.servers).toEqual([
        a.url,
      ]);
      expect(host.child.exitCode).toBeNull();
    } finally {
      await host.stop();
    }
  });
});
