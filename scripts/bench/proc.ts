// A whole process, timed from spawn to exit, with its peak RSS: `/usr/bin/time -f %M` when installed (the
// largest of the process and its waited-for children), else VmHWM polled from /proc/<pid>/status.
import { spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const GNU_TIME = "/usr/bin/time";

export interface Ran {
  ms: number;
  /** Peak resident set, in kB; null when it could not be read. */
  peakKb: number | null;
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  /** Keep stdout (off by default: a tool's chatter through a pipe is not what is measured). */
  stdout?: boolean;
  /** Measure peak RSS (on by default). */
  rss?: boolean;
}

const TAIL = 4000;
let seq = 0;

/** VmHWM (kB) of a live process, or null once it is gone. */
export function vmHwmKb(pid: number): number | null {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** VmRSS (kB) of a live process, or null once it is gone. */
export function vmRssKb(pid: number): number | null {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

export async function runTimed(argv: readonly string[], opts: RunOptions = {}): Promise<Ran> {
  const wantRss = opts.rss !== false;
  const viaTime = wantRss && existsSync(GNU_TIME);
  const rssFile = join(tmpdir(), `mesh-bench-rss-${process.pid}-${seq++}`);
  const full = viaTime ? [GNU_TIME, "-f", "%M", "-o", rssFile, ...argv] : [...argv];
  const started = performance.now();
  const child = spawn(full[0]!, full.slice(1), {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ["ignore", opts.stdout ? "pipe" : "ignore", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr = (stderr + c).slice(-TAIL);
  });
  let polled: number | null = null;
  const poll =
    wantRss && !viaTime && child.pid
      ? setInterval(() => {
          const v = vmHwmKb(child.pid!);
          if (v !== null) polled = Math.max(polled ?? 0, v);
        }, 2)
      : null;
  let timedOut = false;
  const timer = opts.timeoutMs
    ? setTimeout(() => {
        timedOut = true;
        child.kill("SIGKILL");
      }, opts.timeoutMs)
    : null;
  const { code, signal } = await new Promise<{ code: number | null; signal: string | null }>((resolve) => {
    child.once("error", (e) => {
      stderr += `\n${e.message}`;
      resolve({ code: null, signal: null });
    });
    child.once("close", (c, s) => resolve({ code: c, signal: s }));
  });
  const ms = performance.now() - started;
  if (poll) clearInterval(poll);
  if (timer) clearTimeout(timer);
  let peakKb: number | null = polled;
  if (viaTime) {
    try {
      const text = readFileSync(rssFile, "utf8").trim().split("\n");
      const last = Number(text.at(-1));
      peakKb = Number.isFinite(last) ? last : null;
      // GNU time puts "Command exited with non-zero status N" before the figure; keep it out of stderr
    } catch {
      peakKb = null;
    }
    rmSync(rssFile, { force: true });
  }
  return { ms, peakKb, code, signal, stdout, stderr, timedOut };
}

/** One line saying why a run failed, for the table's notes. */
export function failureOf(r: Ran, what: string): string {
  const why = r.timedOut ? "timed out" : r.signal ? `killed by ${r.signal}` : `exit ${r.code}`;
  const tail = r.stderr.trim().split("\n").filter(Boolean).slice(-2).join(" / ").slice(0, 300);
  return `${what}: ${why}${tail ? ` (${tail})` : ""}`;
}

export function which(cmd: string): string | null {
  for (const dir of (process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin")
    .split(":")
    .concat(["/usr/sbin", "/sbin"])) {
    const p = join(dir, cmd);
    if (existsSync(p)) return p;
  }
  return null;
}
