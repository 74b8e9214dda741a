// Issue 27, item 14 (the host's side): no library's raw words reach a user. Through the built executable and
// a real nats-server: a missing program, a bus nobody listens on (at enrol and in the node's log), a spent
// code (a refusal: exit 2, never "(Authorization Violation)"), zod's "must be at least 1 items", and no
// warning of Node's on stderr.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { State } from "../../src/store/index.ts";
import { encodeCode } from "../../src/vocabulary/index.ts";
import { EVENT_WAIT_MS, freePort, type MeshDouble, waitFor } from "../mesh/index.ts";
import { runCli, startCli, startRun } from "../support/cli.ts";
import { meshForFile } from "../support/mesh-file.ts";
import { tempMachine } from "../support/tmp.ts";

let mesh: MeshDouble;
meshForFile((m) => {
  mesh = m;
});

const sha256Of = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

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
    await mesh.revokeCode(code);
    const again = tempMachine();
    const r = await runCli(["enrol", "--state", again.state, "--root", again.root], { input: code });
    expect(r.code, r.stderr).toBe(2);
    const lines = r.stderr.split("\n").filter((l) => l.startsWith("mesh-host:"));
    expect(lines).toEqual([
      expect.stringMatching(
        /^mesh-host: cannot enrol: .* refused enrol\.spent's credentials: the enrolment code is wrong, already used, expired or withdrawn; ask the operator for a new one$/,
      ),
    ]);
    expect(r.stderr).not.toMatch(RAW);
    expect(r.stderr).toContain("enrolment refused");
  });

  it("a good enrolment says nothing of Node's own on stderr, even where NODE_EXTRA_CA_CERTS names no file", async () => {
    const { code } = await mesh.enrolmentCode("quiet");
    const m = tempMachine();
    // a machine-wide setting some hosts carry: the node trusts only the pinned certificate, so it is no concern
    const env = { NODE_EXTRA_CA_CERTS: join(m.base, "no-such-bundle.pem") };
    const r = await runCli(["enrol", "--state", m.state, "--root", m.root], { input: code, env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(RAW);
  });
});

describe("the node's log", () => {
  it("a bus that went away is said as unreachable in the node's log, never ECONNREFUSED; the binary is confirmed all the same (item 18: the laptop on a train)", async () => {
    const { root, state } = tempMachine();
    // enrolled for real (its keys made), then its bus gone: the membership names a port nobody listens on
    const { code } = await mesh.enrolmentCode("logs");
    const enrolled = await runCli(["enrol", "--state", state, "--root", root], { input: code });
    expect(enrolled.code, enrolled.stderr).toBe(0);
    const port = await freePort();
    const saved = new State(state);
    saved.writeMembership({ ...saved.readMembership()!, servers: [`tls://127.0.0.1:${port}`] });
    const run = startCli(["run", "--state", state, "--root", root]);
    try {
      await waitFor(
        () => /nothing listens there/.test(run.output().stderr) || run.child.exitCode !== null,
        EVENT_WAIT_MS,
        "the log line",
      );
      expect(run.output().stderr).toMatch(/nothing listens there/);
      // one reconcile completed with the bus away: the launcher's confirmation is written, the binary's digest
      const confirmed = join(state, "confirmed");
      await waitFor(() => existsSync(confirmed), EVENT_WAIT_MS, "the confirmation");
      expect(readFileSync(confirmed, "utf8")).toBe(`${sha256Of(process.env.MESH_HOST_BIN!)}\n`);
    } finally {
      await run.stop();
    }
    expect(run.output().stderr).not.toMatch(RAW);
  });
});

describe("the host listens on no port (item 18)", () => {
  /** The inodes of the sockets process `pid` holds open. */
  const socketsOf = (pid: number) =>
    readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        return m ? [m[1]!] : [];
      } catch {
        return []; // closed between the listing and the look
      }
    });
  /** Every row of /proc/<pid>/net/<table>: its local address, state and inode. */
  const rows = (pid: number, table: string) =>
    readFileSync(`/proc/${pid}/net/${table}`, "utf8")
      .split("\n")
      .slice(1)
      .filter(Boolean)
      .map((l) => l.trim().split(/\s+/))
      .map((f) => ({ local: f[1]!, state: f[3]!, inode: f[9]! }));

  it("while run holds its link: its sockets are outbound TCP only, none listening, no UDP", async () => {
    const { code } = await mesh.enrolmentCode("ports");
    const { root, state } = tempMachine();
    const enrolled = await runCli(["enrol", "--state", state, "--root", root], { input: code });
    expect(enrolled.code, enrolled.stderr).toBe(0);
    const run = startRun(state, root);
    try {
      await waitFor(
        () => mesh.heartbeats.some((h) => h.subject === "mesh.heartbeat.ports"),
        EVENT_WAIT_MS,
        "a heartbeat from the node",
      );
      const pid = run.child.pid!;
      const mine = new Set(socketsOf(pid));
      expect(mine.size).toBeGreaterThan(0);
      const tcp = [...rows(pid, "tcp"), ...rows(pid, "tcp6")].filter((r) => mine.has(r.inode));
      // the link: at least one established connection (state 01), and not one socket in LISTEN (0A)
      expect(tcp.some((r) => r.state === "01")).toBe(true);
      expect(tcp.filter((r) => r.state === "0A")).toEqual([]);
      const udp = [...rows(pid, "udp"), ...rows(pid, "udp6")].filter((r) => mine.has(r.inode));
      expect(udp).toEqual([]);
    } finally {
      await run.stop();
    }
  });
});

describe("NODE_EXTRA_CA_CERTS naming a file that cannot be read", () => {
  it("run says nothing of Node's, and SIGTERM to the process a service manager started still stops it, exit 0", async () => {
    const { code } = await mesh.enrolmentCode("extra");
    const { base, root, state } = tempMachine();
    const env = { NODE_EXTRA_CA_CERTS: join(base, "no-such-bundle.pem") };
    const enrolled = await runCli(["enrol", "--state", state, "--root", root], { input: code, env });
    expect(enrolled.code, enrolled.stderr).toBe(0);
    const run = startRun(state, root, [], { env });
    await waitFor(
      () => mesh.heartbeats.some((h) => h.subject === "mesh.heartbeat.extra"),
      EVENT_WAIT_MS,
      "a heartbeat from the node",
    );
    // to the leader alone, as systemd's stop sends it: passed on, and the node's own exit status comes back
    expect(await run.stop("SIGTERM")).toBe(0);
    expect(`${enrolled.stderr}${run.output().stderr}`).not.toMatch(RAW);
  });
});
