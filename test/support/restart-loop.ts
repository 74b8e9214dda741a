// systemd's part in an upgrade test: the launcher (pkgbuild/launch) started, and started again whenever it exits
// (Restart=always), until told to stop. What it exited with, each time, and what it said on stderr are kept.
import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { killGroup, signalGroup, spawnGroup } from "./processes.ts";
import { REPO } from "./sea.ts";

export const LAUNCH = join(REPO, "pkgbuild/launch");
/** How long a stop waits for the host to finish its step and exit before it is SIGKILLed. */
const STOP_GRACE_MS = 60_000;

export class RestartLoop {
  starts = 0;
  exits: (number | string)[] = [];
  log = "";
  private child: ChildProcess | null = null;
  private stopping = false;
  private readonly done: Promise<void>;

  /** `args` follow `launch run --state STATE --root ROOT`. */
  constructor(bin: string, state: string, root: string, args: string[] = []) {
    this.done = (async () => {
      while (!this.stopping) {
        this.starts++;
        const child = spawnGroup("sh", [LAUNCH, "run", "--state", state, "--root", root, ...args], {
          env: { ...process.env, MESH_HOST_BIN: bin },
          stdio: ["ignore", "ignore", "pipe"],
        });
        this.child = child;
        child.stderr!.on("data", (d) => (this.log += d));
        this.exits.push(
          await new Promise((r) =>
            child.on("exit", (c, s) => {
              killGroup(child.pid!);
              r(c ?? s ?? -1);
            }),
          ),
        );
        if (!this.stopping) await new Promise((r) => setTimeout(r, 100));
      }
    })();
  }

  /** SIGKILL the running start (the launcher exec'd the host, so its group is the host's): the loop starts it again. */
  kill(): boolean {
    return this.child?.pid ? signalGroup(this.child.pid, "SIGKILL") : false;
  }

  /** SIGTERM, as systemd stops a unit; a host still there after the grace is SIGKILLed (and said in `log`). */
  async stop(graceMs = STOP_GRACE_MS): Promise<void> {
    this.stopping = true;
    this.child?.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(true), graceMs);
    });
    if (await Promise.race([this.done.then(() => false), late])) {
      this.log += `restart-loop: still running ${graceMs} ms after SIGTERM: SIGKILLed\n`;
      this.kill();
      await this.done;
    }
    clearTimeout(timer);
  }
}
