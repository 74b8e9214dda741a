// Debian's nats-server, as `mesh up`'s children: started in the foreground, known ready by their log, reloaded
// by SIGHUP (a user list changes; a server is never restarted for it), stopped by SIGTERM.
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  MESH_DIR_MODE,
  SERVER_LOG_POLL_MS,
  SERVER_RELOAD_MS,
  SERVER_START_MS,
  SERVER_STOP_MS,
} from "../defaults.ts";
import { meshUsers, type ServerUser, serverConf, usersConf } from "./conf.ts";
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
  // the configuration follows the directory wherever it was copied; the user list is the last the controller
  // rendered from the bus (the controller's user alone on a machine new to the mesh)
  mkdirSync(mesh.serverDir(i), { recursive: true, mode: MESH_DIR_MODE });
  writeAtomic(
    join(mesh.serverDir(i), "server.conf"),
    serverConf(mesh, { servers: mesh.servers() }, mesh.secrets(), i),
  );
  if (!existsSync(join(mesh.serverDir(i), "users.conf"))) writeUsers(mesh, meshUsers(mesh.secrets(), []));
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

/** Render the user list into every server's directory; whether it changed. */
export function writeUsers(mesh: MeshDir, users: ServerUser[]): boolean {
  const text = usersConf(users);
  let changed = false;
  mesh.servers().forEach((_, j) => {
    const file = join(mesh.serverDir(j + 1), "users.conf");
    if (existsSync(file) && readFileSync(file, "utf8") === text) return;
    mkdirSync(mesh.serverDir(j + 1), { recursive: true, mode: MESH_DIR_MODE });
    writeAtomic(file, text);
    changed = true;
  });
  return changed;
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

/**
 * Rewrite the user list and have every running server read it again: SIGHUP, then its log saying it reloaded.
 * Returns how many were reloaded; a server that is down reads the list when it starts.
 */
export async function reloadUsers(mesh: MeshDir, users: ServerUser[]): Promise<number> {
  if (!writeUsers(mesh, users)) return 0;
  const pids = mesh
    .servers()
    .map((_, j) => ({ i: j + 1, pid: runningPid(mesh, j + 1) }))
    .filter((s): s is { i: number; pid: number } => s.pid !== null);
  await Promise.all(
    pids.map(async ({ i, pid }) => {
      const log = logFile(mesh, i);
      const from = logSize(log);
      process.kill(pid, "SIGHUP");
      await awaitLog(
        log,
        from,
        "Reloaded server configuration",
        /Failed to reload|\[FTL\]/,
        SERVER_RELOAD_MS,
        () => !alive(pid),
      ).catch((e: Error) => {
        throw new Error(`server ${i} did not take the new user list: ${e.message}`);
      });
    }),
  );
  return pids.length;
}
