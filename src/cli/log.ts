// Logs go to stderr, never stdout: JSON lines for a machine to read (pino's shape: level, time, pid, the fields,
// msg), or one short line for a person at a terminal; under systemd each line starts with journald's <N>
// priority so `journalctl -p warning` finds failures. Anything named like a secret is censored before either
// form is written. Written here, not by pino: the host logs a few lines an apply, and pino brought worker
// threads, streams, assert and its transports into every start (~8 ms and ~2 MB of each, issue 22).
import { fstatSync, writeSync } from "node:fs";
import type { Logger } from "../appliers/index.ts";
import { UsageError } from "./args.ts";

export type Log = Logger;

/** Censored at the top of a line's fields and one object down (`password`, `membership.password`). */
const REDACT = new Set(["password", "token", "secret", "key"]);
const CENSOR = "[redacted]";

const LEVEL_NUMBERS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity };
const LEVELS = Object.keys(LEVEL_NUMBERS);

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
  const threshold = LEVEL_NUMBERS[(opts.level ?? logLevel()) as keyof typeof LEVEL_NUMBERS];
  const write = (level: number, fields: object, msg?: string) => {
    if (level < threshold) return;
    const line = jsonLine(level, fields, msg);
    const shaped = format === "text" ? `${textLine(line)}\n` : `${line}\n`;
    writeAll(journal ? `<${priority(level)}>${shaped}` : shaped);
  };
  return {
    debug: (fields, msg) => write(20, fields, msg),
    info: (fields, msg) => write(30, fields, msg),
    warn: (fields, msg) => write(40, fields, msg),
    error: (fields, msg) => write(50, fields, msg),
  };
}

/** One line as pino wrote it: level, time, pid, the fields (censored, an `err` as its type, message and stack), msg. */
export function jsonLine(level: number, fields: object, msg?: string): string {
  const head = { level, time: Date.now(), pid: process.pid };
  try {
    return JSON.stringify({ ...head, ...censored(fields), ...(msg === undefined ? {} : { msg }) }, plain);
  } catch {
    // a field that cannot be written (a cycle) costs its fields, never the line
    return JSON.stringify({ ...head, fields: "[unserialisable]", ...(msg === undefined ? {} : { msg }) });
  }
}

function censored(fields: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (REDACT.has(k)) out[k] = CENSOR;
    else if (k === "err" && v instanceof Error) out[k] = { type: v.name, message: v.message, stack: v.stack };
    else if (v && typeof v === "object" && !Array.isArray(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([kk, vv]) => [kk, REDACT.has(kk) ? CENSOR : vv]));
    else out[k] = v;
  }
  return out;
}

/** JSON for what JSON.stringify refuses: a bigint as its digits. */
function plain(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}
