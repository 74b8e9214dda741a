// What the bus scenarios (3, 6, 7, 8) share: a node enrolled with the mesh double through the CLI, `mesh-host
// run` as a process that can be stopped or SIGKILLed, its reports counted at the double and in its own logs,
// and the check that its server user holds exactly protocol.md's permissions.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadKeys, privateB64, State, settledOf } from "../../src/store/index.ts";
import type { Report } from "../../src/vocabulary/index.ts";
import type { Received } from "../mesh/index.ts";
import { EVENT_WAIT_MS, MeshDouble, permissionsFor } from "../mesh/index.ts";
import { describeExit, type Exit, meshHost, type Running, sleep, tempDir } from "./support.ts";

/**
 * protocol.md, "The node's permissions", as written there: the fixture must say exactly this. A node enrolled now
 * reads directly (a direct get of its own subject's last declaration, woken by the core copy of each); one enrolled
 * before holds its consumer's grants.
 */
export function protocolPermissions(n: string, reads: "direct" | "consumer" = "direct") {
  const own = [`mesh.report.${n}`, `mesh.heartbeat.${n}`, `mesh.rekey.${n}`];
  if (reads === "direct")
    return {
      publish: {
        allow: [
          ...own,
          `$JS.API.DIRECT.GET.DECLARE.mesh.declare.${n}`,
          "$JS.API.DIRECT.GET.OBJ_mesh-releases",
        ],
      },
      subscribe: { allow: [`_INBOX.node.${n}.>`, `mesh.plan.${n}`, `mesh.declare.${n}`] },
      allow_responses: true,
    };
  return {
    publish: {
      allow: [
        ...own,
        `$JS.API.CONSUMER.INFO.DECLARE.node-${n}`,
        `$JS.API.CONSUMER.MSG.NEXT.DECLARE.node-${n}`,
        `$JS.ACK.DECLARE.node-${n}.>`,
        "$JS.API.DIRECT.GET.OBJ_mesh-releases",
      ],
    },
    subscribe: { allow: [`_INBOX.node.${n}.>`, `mesh.plan.${n}`] },
    allow_responses: true,
  };
}

/** The node's user on the double's server: exactly protocol.md's permissions, no more, no fewer. */
export function permissionProblems(mesh: MeshDouble, node: string): string[] {
  const user = mesh.server.users.find((u) => u.user === `node.${node}`);
  if (!user) return [`the server has no user node.${node}`];
  const want = protocolPermissions(node);
  const problems: string[] = [];
  if (JSON.stringify(permissionsFor("node", node)) !== JSON.stringify(want))
    problems.push("test/fixtures/node-permissions.json is not protocol.md's permission set");
  if (JSON.stringify(user.permissions) !== JSON.stringify(want))
    problems.push(`node.${node} runs with ${JSON.stringify(user.permissions)}, not protocol.md's set`);
  return problems;
}

export class BusNode {
  readonly base: string;
  readonly root: string;
  readonly state: string;
  /** stdout and stderr of every command this node ran, in order: what a secrets check reads. */
  readonly outputs: string[] = [];
  /** The stderr of every `run`, for counting the reports it said it made. */
  readonly runLogs: string[] = [];
  host: Running | null = null;
  token = "";

  constructor(
    readonly mesh: MeshDouble,
    readonly name: string,
  ) {
    this.base = tempDir(`mesh-chaos-${name}-`);
    this.root = join(this.base, "root");
    this.state = join(this.base, "state");
    mkdirSync(this.root);
  }

  /**
   * Enrol through the CLI with a fresh code. The node reads directly: a declaration it did not settle is read again
   * at its next link, with no consumer's ack wait to shorten.
   */
  static async enrolled(mesh: MeshDouble, name: string): Promise<BusNode> {
    const node = new BusNode(mesh, name);
    const { code, token } = await mesh.enrolmentCode(name);
    node.token = token;
    const exit = await node.cli(["enrol"], {}, code);
    if (exit.code !== 0) throw new Error(`enrol ${name}: ${describeExit(exit)}`);
    return node;
  }

  /** The identity private key's base64 (the node's only sign-in secret): it must show nowhere but its 0600 file. */
  get password(): string {
    const keys = loadKeys(this.state);
    return keys.ok ? privateB64(keys.keys.identity.privateKey) : "";
  }

  /** A command of this node's; `input` is its standard input (the enrolment code, never argv). */
  async cli(args: string[], env: Record<string, string> = {}, input?: string): Promise<Exit> {
    const run = await meshHost([...args, "--state", this.state, "--root", this.root, "--host", "linux"], {
      env,
      input,
    });
    const exit = await run.exited;
    this.outputs.push(exit.stdout, exit.stderr);
    return exit;
  }

  /** `mesh-host run`, logging at `level` (debug for the secrets flow). */
  async start(opts: { driftS?: number; level?: string } = {}): Promise<Running> {
    const host = await meshHost(
      [
        "run",
        "--state",
        this.state,
        "--root",
        this.root,
        "--host",
        "linux",
        "--heartbeat-s",
        "1",
        "--redial-spread-s",
        "1",
        "--drift-s",
        String(opts.driftS ?? 3600),
      ],
      { env: { MESH_LOG: opts.level ?? "info" }, timeoutMs: 30 * 60_000 },
    );
    this.host = host;
    host.exited.then((exit) => {
      this.outputs.push(exit.stdout, exit.stderr);
      this.runLogs.push(exit.stderr);
    });
    return host;
  }

  /** SIGTERM, as the service manager stops it: it must exit 0. */
  async stop(): Promise<string[]> {
    const host = this.host;
    this.host = null;
    if (!host) return [];
    host.child.kill("SIGTERM");
    const exit = await host.exited;
    await sleep(0);
    return exit.code === 0 ? [] : [`run did not exit 0 on SIGTERM: ${describeExit(exit)}`];
  }

  async kill(): Promise<Exit | null> {
    const host = this.host;
    this.host = null;
    if (!host) return null;
    const exit = await host.kill();
    await sleep(0);
    return exit;
  }

  reports(): Received<Report>[] {
    return this.mesh.reports.filter((r) => r.subject === `mesh.report.${this.name}`);
  }

  /** Wait for a report of `seq` (of `outcome` when given); a string says what did not come. */
  async report(seq: number, outcome?: string, timeoutMs = EVENT_WAIT_MS): Promise<Received<Report> | string> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = this.reports().find(
        (r) => r.value?.declaration.seq === seq && (!outcome || r.value.outcome === outcome),
      );
      if (found) return found;
      if (performance.now() > deadline) {
        const got = this.reports().map((r) => `${r.value?.declaration.seq}:${r.value?.outcome}`);
        const tail = this.host ? "" : " (run is not running)";
        return `no ${outcome ?? ""} report of seq ${seq} within ${timeoutMs} ms (got ${got.join(" ") || "none"})${tail}`;
      }
      await sleep(20);
    }
  }

  /** The reports `run` said it made (settled, superseded, a reconcile that changed something), by seq:outcome. */
  saidReports(): string[] {
    const out: string[] = [];
    for (const entry of this.runLogs.flatMap(logLines))
      if (entry.msg === "declaration settled") out.push(`${entry.seq}:${entry.outcome}`);
      else if (entry.msg === "declaration superseded by a newer one") out.push(`${entry.seq}:superseded`);
    return out;
  }

  /** How many times the `run` in progress has logged `msg` so far. */
  loggedCount(msg: string): number {
    return logLines(this.host?.output().stderr ?? "").filter((e) => e.msg === msg).length;
  }

  /** What a failure message says of the `run` in progress: running or how it ended, and its last log lines. */
  runTail(): string {
    const host = this.host;
    if (!host) return "run is not running";
    const ended = host.child.exitCode ?? host.child.signalCode;
    const tail = host.output().stderr.trim().split("\n").slice(-4).join(" | ").slice(-600);
    return `${ended === null ? "run is running" : `run ended (${ended})`}; it logged: ${tail || "nothing"}`;
  }

  /** Wait until the node has settled every declaration it was given (the double's awaitSettled), or say why not. */
  async settled(): Promise<string[]> {
    try {
      await this.mesh.awaitSettled(this.name);
      return [];
    } catch (e) {
      return [(e as Error).message];
    }
  }

  /** Every report `run` said it made arrived at the double, and nothing waits in the outbox. */
  lostReports(): string[] {
    const received = this.reports().map((r) => `${r.value?.declaration.seq}:${r.value?.outcome}`);
    const problems: string[] = [];
    for (const said of this.saidReports()) {
      const i = received.indexOf(said);
      if (i < 0) problems.push(`the report ${said} run logged never arrived`);
      else received.splice(i, 1);
    }
    const waiting = this.outbox();
    if (waiting.length) problems.push(`${waiting.length} reports still wait in the outbox`);
    return problems;
  }

  /** The sequence of the last declaration the node settled from the mesh whose key is `meshKey` (0: none). */
  settledSeq(meshKey: string): number {
    return settledOf(new State(this.state), meshKey)?.seq ?? 0;
  }

  outbox(): string[] {
    try {
      return readdirSync(join(this.state, "outbox")).filter((n) => n.endsWith(".json"));
    } catch {
      return [];
    }
  }

  /** The file that ends the slow action of `tag`'s declaration (busDeclaration) once it exists. */
  gate(tag: string): string {
    return join(this.base, `gate-${tag}`);
  }

  /** Let the slow action of `tag`'s declaration end. */
  release(tag: string): void {
    writeFileSync(this.gate(tag), "");
  }

  fileText(path: string): string | null {
    try {
      return readFileSync(join(this.root, path), "utf8");
    } catch {
      return null;
    }
  }
}

/** Wait for `what` to hold, polling; false after `timeoutMs`. */
export async function until(what: () => boolean, timeoutMs = EVENT_WAIT_MS): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (what()) return true;
    await sleep(10);
  }
  return what();
}

/** The JSON lines of a `run`'s stderr (pino), each parsed; other lines left out. */
function logLines(log: string): { msg?: string; seq?: number; outcome?: string }[] {
  const out: { msg?: string; seq?: number; outcome?: string }[] = [];
  for (const line of log.split("\n")) {
    try {
      const entry: unknown = JSON.parse(line);
      if (entry && typeof entry === "object") out.push(entry);
    } catch {
      // not a log line (a panic's text): nothing said
    }
  }
  return out;
}

/** The pid of the nats-server started with `confFile`, found in /proc: to SIGKILL it rather than stop it politely. */
export function serverPid(confFile: string): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (argv.includes(confFile)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no nats-server runs with ${confFile}`);
}

/** A double for one scenario: started, handed over, stopped however the scenario ends. */
export async function withMesh<T>(fn: (mesh: MeshDouble) => Promise<T>): Promise<T> {
  const mesh = await MeshDouble.start();
  // enrolled as the controller enrols now: each node reads its declarations directly
  mesh.defaultReads = "direct";
  try {
    return await fn(mesh);
  } finally {
    await mesh.stop();
  }
}
