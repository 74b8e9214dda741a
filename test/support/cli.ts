// Run the mesh-host CLI as a person would: a separate process, its stdout, stderr and exit status.
import { join } from "node:path";
import { EVENT_WAIT_MS } from "./events.ts";
import { killGroup, spawnGroup } from "./processes.ts";

const REPO = join(import.meta.dirname, "../..");

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The command that runs mesh-host: the built executable when MESH_HOST_BIN names one, the sources otherwise. */
export function cliCommand(): string[] {
  if (process.env.MESH_HOST_BIN) return [process.env.MESH_HOST_BIN];
  return [process.execPath, join(REPO, "node_modules/tsx/dist/cli.mjs"), join(REPO, "src/cli/main.ts")];
}

export function runCli(
  args: string[],
  opts: { env?: Record<string, string>; input?: string; timeoutMs?: number } = {},
): Promise<CliResult> {
  const [cmd, ...pre] = cliCommand();
  return new Promise((resolve, reject) => {
    const child = spawnGroup(cmd!, [...pre, ...args], {
      env: { ...process.env, ...opts.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => (stderr += d));
    // a command that exits before reading its input closes the pipe: EPIPE then says nothing about the test,
    // and unhandled it was an uncaught exception that vitest blamed on whichever test ran at the time
    child.stdin!.on("error", () => {});
    child.stdin!.end(opts.input ?? "");
    const timer = setTimeout(() => killGroup(child.pid!), opts.timeoutMs ?? EVENT_WAIT_MS);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      // whatever it left in its group (tsx's node child after a kill) ends with it
      killGroup(child.pid!);
      resolve({ code, stdout, stderr });
    });
  });
}

export interface Running {
  child: import("node:child_process").ChildProcess;
  output(): { stdout: string; stderr: string };
  /** Resolves with the exit status (or the signal's name). */
  exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * A long-running command (`run`): started, read as it goes, stopped by a signal. SIGKILL ends its whole
 * process group (through tsx the host is tsx's child, which a SIGKILL of tsx alone would leave running); a
 * polite signal goes to the leader alone, as a service manager sends it, and the group is ended once it exits.
 */
export function startCli(args: string[], opts: { env?: Record<string, string> } = {}): Running {
  const [cmd, ...pre] = cliCommand();
  const child = spawnGroup(cmd!, [...pre, ...args], {
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<number | string>((resolve) =>
    child.on("exit", (code, signal) => {
      killGroup(child.pid!);
      resolve(code ?? signal ?? -1);
    }),
  );
  return {
    child,
    output: () => ({ stdout, stderr }),
    exited,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null)
        if (signal === "SIGKILL") killGroup(child.pid!);
        else child.kill(signal);
      return await exited;
    },
  };
}

/**
 * `mesh-host run` as the e2e tests run it: a heartbeat a second and redials spread over a second, so a test
 * waits on events rather than the production pacing; `extra` adds each test's own flags (drift, move grace).
 */
export function startRun(
  state: string,
  root: string,
  extra: string[] = [],
  opts: { env?: Record<string, string> } = {},
): Running {
  return startCli(
    ["run", "--state", state, "--root", root, "--heartbeat-s", "1", "--redial-spread-s", "1", ...extra],
    opts,
  );
}
