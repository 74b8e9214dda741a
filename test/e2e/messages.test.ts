// Issue 27, item 14 (the host's side): no library's raw words reach a user. Through the built executable and
// a real nats-server: a missing program, a bus nobody listens on (at enrol and in the node's log), a spent
// code (a refusal: exit 2, never "(Authorization Violation)"), zod's "must be at least 1 items", and no
// warning of Node's on stderr.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureKeys, State } from "../../src/store/index.ts";
import { encodeCode } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS, freePort, type MeshDouble, waitFor } from "../mesh/index.ts";
import { runCli, startCli } from "../support/cli.ts";
import { meshForFile } from "../support/mesh-file.ts";
import { tempMachine } from "../support/tmp.ts";

let mesh: MeshDouble;
meshForFile((m) => {
  mesh = m;
});

/** What no user should read: errno codes, nats' own words, zod's, Node's warnings. */
const RAW = /ENOENT|ECONNREFUSED|Authorization Violation|at least 1 items|Warning|\(node:\d+\)/;

function declaration(base: string, resources: unknown[]): string {
  const file = join(base, "d.json");
  writeFileSync(file, JSON.stringify({ v: 1, node: "n1", mode: "converged", resources }));
  return file;
}

describe("a step's words", () => {
  it("a program that is not there is said as missing, and where it was looked for", async () => {
    const { base, root, state } = tempMachine();
    const file = declaration(base, [{ id: "bare", type: "action", run: ["no-such-program-here"] }]);
    const r = await runCli(["apply", file, "--root", root, "--state", state, "--json"]);
    expect(r.code, r.stderr).toBe(1);
    const step = JSON.parse(r.stdout).report.steps[0];
    expect(step.detail).toMatch(
      /^could not start: no program "no-such-program-here" on the search path \(.*\/usr\/bin.*\)$/,
    );
    expect(`${r.stdout}${r.stderr}`).not.toMatch(RAW);
  });

  it("an empty argv is refused in our words, never zod's", async () => {
    const { base, root, state } = tempMachine();
    const file = declaration(base, [{ id: "go", type: "action", run: [] }]);
    const r = await runCli(["plan", file, "--root", root, "--state", state]);
    expect([r.code, r.stderr]).toEqual([2, 'mesh-host: resource "go", field "run": must name a program\n']);
  });
});

describe("enrolment's words", () => {
  it("a bus nobody listens on: exit 1, said as unreachable (never ECONNREFUSED), logged as failed, not refused", async () => {
    const { root, state } = tempMachine();
    const port = await freePort();
    const code = encodeCode({
      node: "nobody",
      servers: [`tls://127.0.0.1:${port}`],
      fingerprint: mesh.fingerprint,
      transport: "nats",
      token: "t".repeat(43),
    });
    const r = await runCli(["enrol", "--state", state, "--root", root], { input: code });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`127.0.0.1:${port}: nothing listens there (connection refused)`);
    expect(r.stderr).not.toMatch(RAW);
    expect(r.stderr).not.toContain("enrolment refused");
    expect(r.stderr).toContain("enrolment failed");
  });

  it("a spent code is a refusal: exit 2, one line saying the code is spent, wrong or withdrawn", async () => {
    const { code } = await mesh.enrolmentCode("spent");
    const first = tempMachine();
    const ok = await runCli(["enrol", "--state", first.state, "--root", first.root], { input: code });
    expect(ok.code, ok.stderr).toBe(0);
    // what the controller does once the code is used: its user goes
    mesh.removeUser("enrol.spent");
    await mesh.reloadUsers();
    const again = tempMachine();
    const r = await runCli(["enrol", "--state", again.state, "--root", again.root], { input: code });
    expect(r.code, r.stderr).toBe(2);
    const lines = r.stderr.split("\n").filter((l) => l.startsWith("mesh-host:"));
    expect(lines).toEqual([
      expect.stringMatching(
        /^mesh-host: cannot enrol: .* refused enrol\.spent's credentials: the enrolment code is wrong, already used, or withdrawn; ask the operator for a new one$/,
      ),
    ]);
    expect(r.stderr).not.toMatch(RAW);
    expect(r.stderr).toContain("enrolment refused");
  });

  it("a good enrolment says nothing of Node's own on stderr", async () => {
    const { code } = await mesh.enrolmentCode("quiet");
    const m = tempMachine();
    const r = await runCli(["enrol", "--state", m.state, "--root", m.root], { input: code });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(RAW);
  });
});

describe("the node's log", () => {
  it("a bus that went away is said as unreachable in the node's log, never ECONNREFUSED", async () => {
    const { root, state } = tempMachine();
    const membership = await mesh.admit("logs");
    const port = await freePort();
    new State(state).writeMembership({ ...membership, servers: [`tls://127.0.0.1:${port}`] });
    new State(state).writeNode({ node: "logs", mode: null });
    // a node signs what it says with its identity key: an enrolled node has one
    if (!ensureKeys(state).ok) throw new Error(`cannot make the node's keys in ${state}`);
    const run = startCli(["run", "--state", state, "--root", root]);
    try {
      await waitFor(() => /nothing listens there/.test(run.output().stderr), EVENT_WAIT_MS, "the log line");
    } finally {
      await run.stop();
    }
    expect(run.output().stderr).not.toMatch(RAW);
  });
});
