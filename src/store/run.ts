// What `run` says of itself for `status` to read: its pid (and the process's start, so a recycled pid is not
// taken for it), since when it runs, the link's state since when and why, and when the last heartbeat left.
import * as z from "zod";
import { startTimeOf } from "./lock.ts";
import type { State } from "./state.ts";

const RunFile = z.object({
  format: z.number().int(),
  pid: z.number().int(),
  /** The process's start time in clock ticks (/proc/PID/stat), null where /proc is not. */
  start: z.string().nullable(),
  since: z.string(),
  link: z.object({ up: z.boolean(), since: z.string(), error: z.string().nullable() }).nullable(),
  heartbeat_at: z.string().nullable(),
});
export type RunFile = z.infer<typeof RunFile>;

const NAME = "run.json";

/** The running host's own account, kept current by each change it makes to it. */
export class RunRecord {
  private value: Omit<RunFile, "format">;

  constructor(private readonly state: State) {
    this.value = {
      pid: process.pid,
      start: startTimeOf(process.pid),
      since: new Date().toISOString(),
      link: null,
      heartbeat_at: null,
    };
    state.writeVersioned(NAME, this.value);
  }

  /** The link came up or went down; `since` moves only when the state does. */
  link(up: boolean, error: string | null = null): void {
    const since = this.value.link?.up === up ? this.value.link.since : new Date().toISOString();
    this.value = { ...this.value, link: { up, since, error: up ? null : error } };
    this.state.writeVersioned(NAME, this.value);
  }

  /** `run` is exiting: from now its link is down, so `status` never shows it up, nor down since it came up. */
  stopped(): void {
    this.link(false, "mesh-host run stopped");
  }

  heartbeat(at: string): void {
    this.value = { ...this.value, heartbeat_at: at };
    this.state.writeVersioned(NAME, this.value);
  }
}

/** What the last `run` said, and whether it is alive still (the same pid, started at the same instant). */
export function readRun(state: State): (RunFile & { alive: boolean }) | null {
  const file = state.readVersioned(NAME, RunFile);
  if (!file) return null;
  const now = startTimeOf(file.pid);
  return { ...file, alive: now !== null && (file.start === null || file.start === now) };
}
