// Logs are pino JSON lines on stderr, never stdout; anything named like a secret is censored.
import pino from "pino";

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

export function makeLog(level = process.env.MESH_LOG ?? "info"): Log {
  return pino(
    { level, base: { pid: process.pid }, redact: { paths: REDACT, censor: "[redacted]" } },
    pino.destination({ fd: 2, sync: true }),
  );
}
