// A mesh of the test's own, set up as an operator and a machine's owner would: `mesh init` with servers on free
// ports, `mesh up` known ready by what it says, each node added (`mesh node add`), enrolled with the code on
// stdin into a state directory and a throwaway --root of its own, and run until it says its link is up. Only the
// set-up lives here; what a test asserts stays in the test. Every process it starts is stopped, last first.
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, beforeAll, expect } from "vitest";
import { MeshDir, serviceAuthenticator } from "../../src/mesh/index.ts";
import { type Running, runCli, startRun } from "../support/cli.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { RestartLoop } from "../support/restart-loop.ts";
import { ensureSea } from "../support/sea.ts";
import { waitFor } from "./index.ts";
import { awaitOutput, freePortPairs, initMesh, mesh, meshSetUp, meshUp } from "./operator.ts";

/** The processes a test started and has not stopped, stopped last first. */
export class Kept {
  private readonly all: Running[] = [];

  keep(r: Running): Running {
    this.all.push(r);
    return r;
  }

  async stopAll(): Promise<void> {
    while (this.all.length) await this.all.pop()!.stop();
  }
}

/**
 * A test file's processes through the built executable: the executable made before its tests, and what each test
 * kept stopped after it. Called at the file's top, after its imports: after-hooks run last-registered first, so the
 * processes stop before tmp.ts removes the directories (a server still writing JetStream files into one makes the
 * removal fail).
 */
export function keptRuns(): Kept {
  const kept = new Kept();
  beforeAll(() => {
    process.env.MESH_HOST_BIN ??= ensureSea();
  }, 600_000);
  afterEach(async () => {
    await kept.stopAll();
  });
  return kept;
}

/** A declaration of one file, `/etc/app.conf` holding `content`: the push most mesh tests make. */
export const appConf = (content: string) => ({
  v: 1,
  mode: "converged",
  resources: [{ id: "conf", type: "file", path: "/etc/app.conf", content }],
});

/** A node's two directories on the test's machine. */
export interface NodeDirs {
  state: string;
  root: string;
}

/** What enrolment left: the node's directories, and all `enrol` said (a test reads the code is not in it). */
export interface Enrolled extends NodeDirs {
  said: string;
}

export interface LinkedNode extends Enrolled {
  name: string;
  /** The enrolment code it was given on stdin. */
  code: string;
  run: Running;
}

export interface AddOptions {
  /** `node add`'s own flags (labels). */
  args?: string[];
  /** Run again when the bus refused the controller's CONNECT (test/mesh/operator.ts, meshSetUp). */
  setUp?: boolean;
}

/** `mesh node add NAME`, which must exit 0; its stdout, the enrolment code. */
export async function addNode(dir: string, name: string, opts: AddOptions = {}): Promise<string> {
  const args = ["node", "add", name, ...(opts.args ?? [])];
  const added = opts.setUp ? await meshSetUp(dir, args) : await mesh(dir, args);
  expect(added.code, added.stderr).toBe(0);
  return added.stdout;
}

export interface EnrolOptions {
  /** Directories made under its root before it enrols. */
  rootDirs?: string[];
  /** How the code is given: on stdin (the default) or as `enrol CODE`. */
  codeAs?: "stdin" | "argument";
}

/**
 * `enrol` with `code` (a code of this mesh's, or of a mesh double's) into `at/state`, with `at/root` (and
 * `rootDirs` under it) made first; it must exit 0.
 */
export async function enrolAt(code: string, at: string, opts: EnrolOptions = {}): Promise<Enrolled> {
  const state = join(at, "state");
  const root = join(at, "root");
  mkdirSync(root, { recursive: true });
  for (const d of opts.rootDirs ?? []) mkdirSync(join(root, d), { recursive: true });
  const dirs = ["--state", state, "--root", root];
  const enrol =
    opts.codeAs === "argument"
      ? await runCli(["enrol", code, ...dirs])
      : await runCli(["enrol", ...dirs], { input: code });
  expect(enrol.code, enrol.stderr).toBe(0);
  return { state, root, said: enrol.stdout + enrol.stderr };
}

/** `mesh-host run` on an enrolled node, kept, resolved once it says its link is up. */
export async function runLinkUp(kept: Kept, node: NodeDirs, flags: string[] = []): Promise<Running> {
  const run = kept.keep(startRun(node.state, node.root, flags));
  await awaitOutput(run, (o) => o.stderr.includes('"link up"'), "the node's link up");
  return run;
}

export interface NodeOptions extends AddOptions, EnrolOptions {
  /** Where its directories go under the mesh's base (default: its name). */
  at?: string;
  /** `run`'s own flags. */
  flags?: string[];
}

/** A node as a package installs it: its own copy of the executable, run by the launcher (test/support/restart-loop.ts). */
export interface LaunchedNode extends NodeDirs {
  name: string;
  bin: string;
  loop: RestartLoop;
}

const sha256Of = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** The digest the node's state says it confirmed ("" before any). */
export const confirmedOf = (state: string) =>
  readFileSync(join(state, "confirmed"), { flag: "a+" }).toString().trim();

/** A mesh made and up, under a temporary base of its own; its nodes under that base too. */
export class TestMesh {
  readonly kept = new Kept();
  /** The launchers of its launched nodes, stopped before the mesh. */
  readonly loops: RestartLoop[] = [];

  private constructor(
    readonly base: string,
    readonly dir: string,
    readonly up: Running,
  ) {
    this.kept.keep(up);
  }

  /** `mesh init` with `servers` servers on free ports, then `mesh up` of all of them. */
  static async start(prefix: string, servers = 1): Promise<TestMesh> {
    // made here, not by tempDir(): a describe's mesh outlives its first test, and tempDir's go after each test
    const base = mkdtempSync(join(tmpdir(), prefix));
    const dir = join(base, "mesh");
    await initMesh(dir, await freePortPairs(servers));
    return new TestMesh(base, dir, await meshUp(dir));
  }

  keep(r: Running): Running {
    return this.kept.keep(r);
  }

  /** Added, enrolled under `base/<at>`, and run until its link is up. */
  async node(name: string, opts: NodeOptions = {}): Promise<LinkedNode> {
    const code = await addNode(this.dir, name, opts);
    const dirs = await enrolAt(code, join(this.base, opts.at ?? name), opts);
    return { name, code, ...dirs, run: await runLinkUp(this.kept, dirs, opts.flags) };
  }

  /**
   * Added, enrolled under `base/<name>`, its own copy of the executable in `usr/bin` there, run by the launcher
   * with `loopArgs`; resolved once the node confirmed that executable.
   */
  async launched(name: string, loopArgs: string[]): Promise<LaunchedNode> {
    const code = await addNode(this.dir, name);
    const bin = join(this.base, name, "usr/bin/mesh-host");
    mkdirSync(dirname(bin), { recursive: true });
    copyFileSync(ensureSea(), bin);
    chmodSync(bin, 0o755);
    const dirs = await enrolAt(code, join(this.base, name));
    const loop = new RestartLoop(bin, dirs.state, dirs.root, loopArgs);
    this.loops.push(loop);
    const digest = sha256Of(bin);
    await waitFor(() => confirmedOf(dirs.state) === digest, EVENT_WAIT_MS, `${name} confirmed`);
    return { name, bin, ...dirs, loop };
  }

  /** `value` as JSON in a file under the base; its path. */
  file(name: string, value: object): string {
    const path = join(this.base, name);
    writeFileSync(path, JSON.stringify(value));
    return path;
  }

  /** Its launchers stopped, then every process it and its tests kept, last first; its base removed. */
  async stop(): Promise<void> {
    for (const l of this.loops) await l.stop();
    await this.kept.stopAll();
    rmSync(this.base, { recursive: true, force: true });
  }
}

/** A connection with the controller's credential (the mesh's own user, the widest there is on the bus). */
export async function asController(dir: string): Promise<NatsConnection> {
  const m = new MeshDir(dir);
  return await connect({
    servers: m.urls(),
    authenticator: serviceAuthenticator(m.accountKeys(), "mesh", "mesh-test"),
    tls: { ca: m.certPem() },
    reconnect: false,
  });
}
