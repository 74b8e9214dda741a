// Debian's nats-server, as `mesh up`'s children: started in the foreground, known ready by their log, stopped by
// SIGTERM. Never reloaded: users are JWTs, and a revocation reaches the servers over the system account.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { MESH_DIR_MODE, SERVER_LOG_POLL_MS, SERVER_START_MS, SERVER_STOP_MS } from "../defaults.ts";
import { serverConf } from "./conf.ts";
import { alive, writeAtomic } from "./files.ts";
import { type MeshDir, MeshRefused } from "./layout.ts";

/** Debian installs it in /usr/sbin, which a user's PATH may not hold; MESH_NATS_SERVER names another. */
export function natsServerPath(): string {
  const named = process.env.MESH_NATS_SERVER;
  if (named) return named;
  const dirs = [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/usr/local/sbin"];
  const found = dirs
    .filter(Boolean)
    .map((d) => join(d, "nats-server"))
    .find((p) => existsSync(p));
  if (!found)
    throw new MeshRefused(
      "nats-server is not installed (Debian: apt install nats-server), or set MESH_NATS_SERVER",
    );
  return found;
}

export interface RunningServer {
  index: number;
  child: ChildProcess;
  /** Resolves with how it ended, once it has. */
  exited: Promise<string>;
}

function logFile(mesh: MeshDir, i: number): string {
  return join(mesh.serverDir(i), "server.log");
}

function logSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

function logSince(file: string, from: number): string {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch {
    return "";
  }
  try {
    const size = statSync(file).size;
    if (size <= from) return "";
    const buf = Buffer.alloc(size - from);
    readSync(fd, buf, 0, buf.length, from);
    return buf.toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/** The server's own words after `from` until one of `good` or `bad` appears; the last lines said on failure. */
async function awaitLog(
  file: string,
  from: number,
  good: string,
  bad: RegExp,
  ms: number,
  gone: () => boolean,
): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const text = logSince(file, from);
    if (text.includes(good)) return;
    const failed = text.split("\n").find((l) => bad.test(l));
    if (failed) throw new Error(failed.replace(/^\[\d+\] \S+ \S+ /, "").trim());
    if (gone()) throw new Error(`it exited before saying "${good}" (see ${file})`);
    if (Date.now() > deadline)
      throw new Error(`it did not say "${good}" within ${ms / 1000} s (see ${file})`);
    await new Promise((r) => setTimeout(r, SERVER_LOG_POLL_MS));
  }
}

/** Start server `i`; resolves once it says it is ready (its log, not a guess at time). */
export async function startServer(mesh: MeshDir, i: number): Promise<RunningServer> {
  // the configuration follows the directory wherever it was copied: the accounts' JWTs from its accounts.json
  mkdirSync(join(mesh.serverDir(i), "jwt"), { recursive: true, mode: MESH_DIR_MODE });
  writeAtomic(
    join(mesh.serverDir(i), "server.conf"),
    serverConf(mesh, { servers: mesh.servers() }, mesh.accountKeys(), i),
  );
  const log = logFile(mesh, i);
  const from = logSize(log);
  const child = spawn(natsServerPath(), ["-c", join(mesh.serverDir(i), "server.conf")], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (d: string) => {
    stderr = (stderr + d).slice(-2000);
  });
  let ended: string | null = null;
  const exited = new Promise<string>((resolve) => {
    child.once("error", (e) => {
      ended = `cannot start: ${e.message}`;
      resolve(ended);
    });
    child.once("exit", (code, signal) => {
      ended = signal ? `killed by ${signal}` : `exited with status ${code}`;
      resolve(ended);
    });
  });
  try {
    await awaitLog(log, from, "Server is ready", /\[FTL\]/, SERVER_START_MS, () => ended !== null);
  } catch (e) {
    child.kill("SIGKILL");
    const said = stderr.trim().split("\n").at(-1) ?? "";
    throw new Error(`server ${i}: ${(e as Error).message}${said ? `: ${said}` : ""}`);
  }
  return { index: i, child, exited };
}

export async function stopServer(server: RunningServer): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill("SIGTERM");
  const timer = setTimeout(() => server.child.kill("SIGKILL"), SERVER_STOP_MS);
  await server.exited;
  clearTimeout(timer);
}

/** A running server of this mesh, by its pid file: the pid alive and running this server's configuration. */
function runningPid(mesh: MeshDir, i: number): number | null {
  let pid: number;
  try {
    pid = Number(readFileSync(join(mesh.serverDir(i), "server.pid"), "utf8").trim());
  } catch {
    return null;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return null;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return cmdline.includes(join(mesh.serverDir(i), "server.conf")) ? pid : null;
  } catch {
    return null;
  }
}

/** The servers of this mesh running on this machine now, by index. */
export function runningServers(mesh: MeshDir): number[] {
  return mesh
    .servers()
    .map((_, j) => j + 1)
    .filter((i) => runningPid(mesh, i) !== null);
}
