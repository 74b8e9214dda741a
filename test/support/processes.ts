// Processes a test starts, ended with the test however it ends. Each starts in a process group of its own and
// is ended as a group: a tsx parent's node child, dockerd's containerd, wg-quick's wireguard-go go with it, where
// killing the one pid left the rest running with no parent. Whatever a test did not stop is SIGKILLed, group and
// all, when the test process exits or is told to stop. No vitest import: scripts/chaos.ts uses this too.
import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process";

const groups = new Set<number>();
let hooked = false;

/** `spawn` in a new process group (the child leads it), ended with this process if nothing ends it sooner. */
export function spawnGroup(cmd: string, args: readonly string[], opts: SpawnOptions = {}): ChildProcess {
  hookExit();
  const child = spawn(cmd, args, { ...opts, detached: true });
  if (child.pid) groups.add(child.pid);
  return child;
}

/** Track a process group started some other way (its leader's pid), to be ended with this process. */
export function ownGroup(pgid: number): void {
  hookExit();
  groups.add(pgid);
}

/** Signal every process of the group `pgid` leads (or led); false when none is left. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0 = "SIGKILL"): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** SIGKILL the whole group and forget it: nothing of it outlives this call by more than the kernel's reaping. */
export function killGroup(pgid: number): void {
  signalGroup(pgid, "SIGKILL");
  groups.delete(pgid);
}

/** Whether any process of the group is still there (a zombie leader not yet reaped counts). */
export function groupAlive(pgid: number): boolean {
  return signalGroup(pgid, 0);
}

function killAll(): void {
  for (const pgid of [...groups]) killGroup(pgid);
}

// "exit" runs for a normal end and process.exit(); a signal ends a process without it, so the usual ones are
// caught too: the groups are killed, then the signal is raised again as if nothing had listened.
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once("exit", killAll);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = () => {
      killAll();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.once(signal, onSignal);
  }
}
