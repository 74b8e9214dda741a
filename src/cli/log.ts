// Logs go to stderr, never stdout: pino JSON lines for a machine to read, or one short line for a person at a
// terminal; under systemd each line starts with journald's <N> priority so `journalctl -p warning` finds
// failures. Anything named like a secret is censored before either form is written.
import { fstatSync, writeSync } from "node:fs";
import pino from "pino";
import { UsageError } from "./args.ts";

export type Log = pino.Logger;

const REDACT = [
  "password",
  "token",
  "secret",
  "key",
  "*.password",
  "*.token",
  "*.secret",
  "*.key",
  "membership.password",
];

const LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];

/** pino's level number to journald's priority (sd-daemon.h): debug 7, info 6, warning 4, err 3, crit 2. */
function priority(level: number): number {
  if (level >= 60) return 2;
  if (level >= 50) return 3;
  if (level >= 40) return 4;
  if (level >= 30) return 6;
  return 7;
}

const NAMES: Record<number, string> = {
  10: "trace",
  20: "debug",
  30: "info",
  40: "WARN",
  50: "ERROR",
  60: "FATAL",
};

/** True when stderr is the stream systemd connected to the journal (JOURNAL_STREAM is its device:inode). */
export function stderrIsJournal(): boolean {
  const stream = process.env.JOURNAL_STREAM;
  if (!stream) return false;
  try {
    const st = fstatSync(2);
    return stream === `${st.dev}:${st.ino}`;
  } catch {
    return false;
  }
}

/** A JSON log line as a person reads it: the time, the level when not info, the message, then key=value. */
export function textLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json);
  } catch {
    return json.trimEnd();
  }
  const { level, time, msg, pid: _pid, hostname: _host, ...rest } = o;
  const at = new Date(Number(time) || Date.now()).toISOString().slice(11, 19);
  const name = NAMES[Number(level)] ?? String(level);
  const fields = Object.entries(rest).map(
    ([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`,
  );
  return [at, name === "info" ? "" : name, String(msg ?? ""), ...fields].filter(Boolean).join(" ");
}

export interface LogOptions {
  /** json or text; absent: text on a terminal, json otherwise. */
  format?: "json" | "text";
  level?: string;
}

/** The level MESH_LOG asks for, refused in our words when it is none. */
export function logLevel(given = process.env.MESH_LOG): string {
  if (given === undefined || given === "") return "info";
  if (!LEVELS.includes(given))
    throw new UsageError(`MESH_LOG must be one of ${LEVELS.join(", ")}, not "${given.slice(0, 40)}"`);
  return given;
}

/** All of `text` onto stderr: a pipe a reader is slow to drain answers EAGAIN, which is waited out, not lost. */
function writeAll(text: string): void {
  let buf = Buffer.from(text);
  for (let tries = 0; buf.length && tries < 1000; ) {
    try {
      buf = buf.subarray(writeSync(2, buf));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EAGAIN") return;
      tries++;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}

export function makeLog(opts: LogOptions = {}): Log {
  const format = opts.format ?? (process.stderr.isTTY ? "text" : "json");
  const journal = stderrIsJournal();
  const write = (line: string) => {
    const shaped = format === "text" ? `${textLine(line)}\n` : line;
    if (!journal) return writeAll(shaped);
    const level = Number((/"level":(\d+)/.exec(line) ?? [])[1] ?? 30);
    writeAll(`<${priority(level)}>${shaped}`);
  };
  return pino(
    {
      level: opts.level ?? logLevel(),
      base: { pid: process.pid },
      redact: { paths: REDACT, censor: "[redacted]" },
    },
    { write },
  );
}
