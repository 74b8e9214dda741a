// Debian's nats-server as a child of the test: rendered from test/fixtures/nats-server.conf.tmpl with the mesh's
// own decentralized authentication (src/mesh's operator and account JWTs, the `full` resolver), started, stopped
// and restarted on the same port, store and resolver directory. No user list and no password: every user is a
// JWT signed by its account's key, and a revocation is pushed over the system account, never by a reload.
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  type AccountKeys,
  authLines,
  enrolPermissions,
  makeAccountKeys,
  nodePermissions,
  type Permissions,
  type Reads,
} from "../../src/mesh/index.ts";
import { killGroup, spawnGroup } from "../support/processes.ts";

// Debian installs it in /usr/sbin; MESH_NATS_SERVER names another.
export const NATS_SERVER =
  process.env.MESH_NATS_SERVER ??
  ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find((p) =>
    existsSync(p),
  ) ??
  "nats-server";
const FIXTURES = new URL("../fixtures/", import.meta.url);
// failure bounds, not paces: a busy machine may take this long to start a server or see it go
const START_WAIT_MS = 60_000;
const STOP_WAIT_MS = 15_000;

export type { Permissions };

/** A user the test's mesh issued: its name, its user nkey and the grants its JWT carries (absent: every subject). */
export interface ServerUser {
  user: string;
  nkey: string;
  permissions?: Permissions;
}

/** The node's and the enrolling user's permissions: the mesh's own (src/mesh), which test/architecture.test.ts holds to the fixture. */
export function permissionsFor(kind: "node" | "enrol", node: string, reads: Reads = "direct"): Permissions {
  return kind === "node" ? nodePermissions(node, reads) : enrolPermissions(node);
}

export { freePort } from "../support/ports.ts";

export interface ServerFiles {
  dir: string;
  port: number;
  httpPort: number;
  certFile: string;
  keyFile: string;
  storeDir: string;
}

export class NatsServer {
  /** The users issued for this server's accounts so far (a record for the test's checks; the server needs none). */
  users: ServerUser[] = [];
  /** The operator's and accounts' keys the server trusts (src/mesh/accounts.ts). */
  readonly accounts: AccountKeys;
  private child: ChildProcess | null = null;
  private logText = "";
  /** Rendered once: a later render would preload claims newer than a revocation pushed since. */
  private auth: string[] | null = null;

  constructor(
    readonly files: ServerFiles,
    accounts?: AccountKeys,
  ) {
    this.accounts = accounts ?? makeAccountKeys();
  }

  get url(): string {
    return `nats://127.0.0.1:${this.files.port}`;
  }

  get running(): boolean {
    return this.child !== null;
  }

  get log(): string {
    return this.logText;
  }

  get confFile(): string {
    return join(this.files.dir, "server.conf");
  }

  /** Render both files and start; resolves when the server says it is ready. */
  async start(): Promise<void> {
    if (this.child) return;
    this.render();
    // its own process group, killed when the test process exits however it exits: no server outlives its test
    const child = spawnGroup(NATS_SERVER, ["-c", this.confFile], { stdio: ["ignore", "ignore", "pipe"] });
    this.child = child;
    child.once("error", (e) => {
      this.logText += `\ncannot start ${NATS_SERVER}: ${e.message}\n`;
      if (this.child === child) this.child = null;
    });
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      this.logText += chunk;
    });
    child.once("exit", () => {
      if (child.pid) killGroup(child.pid);
      if (this.child === child) this.child = null;
    });
    const from = this.logText.length;
    await this.waitForLog("Server is ready", from, START_WAIT_MS);
  }

  /** SIGTERM, then SIGKILL if it lingers; resolves when the process has exited. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.pid && killGroup(child.pid), STOP_WAIT_MS);
    await exited;
    clearTimeout(timer);
    this.child = null;
  }

  /** SIGSTOP: the server holds its connections open and answers nothing, until `resume`. */
  pause(): void {
    if (this.child?.pid) process.kill(this.child.pid, "SIGSTOP");
  }

  resume(): void {
    if (this.child?.pid) process.kill(this.child.pid, "SIGCONT");
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** SIGHUP (the configuration read again, nothing in it changed); resolves when the server says it reloaded. */
  async reload(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const from = this.logText.length;
    child.kill("SIGHUP");
    await this.waitForLog("Reloaded server configuration", from, START_WAIT_MS);
  }

  private render(): void {
    const template = readFileSync(new URL("nats-server.conf.tmpl", FIXTURES), "utf8");
    const values: Record<string, string> = {
      port: String(this.files.port),
      http_port: String(this.files.httpPort),
      cert_file: this.files.certFile,
      key_file: this.files.keyFile,
      store_dir: this.files.storeDir,
      auth: this.authText(),
    };
    const conf = template.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
      const value = values[key];
      if (value === undefined) throw new Error(`nats-server.conf.tmpl names {{${key}}}, which nothing fills`);
      return value;
    });
    writeFileSync(this.confFile, conf);
  }

  private authText(): string {
    const dir = join(this.files.dir, "jwt");
    mkdirSync(dir, { recursive: true });
    this.auth ??= authLines(this.accounts, dir);
    return this.auth.join("\n");
  }

  private async waitForLog(line: string, from: number, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (!this.logText.slice(from).includes(line)) {
      if (!this.child) throw new Error(`nats-server exited before "${line}":\n${this.logText.slice(-2000)}`);
      if (Date.now() > deadline)
        throw new Error(`nats-server did not say "${line}" in ${ms} ms:\n${this.logText.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}
