// How an executable starts, whichever host's root it is: the CLI run with that root's parts, then the process
// left to exit with its status.
import { main } from "./cli.ts";
import type { HostParts } from "./parts.ts";

/**
 * Node reads NODE_EXTRA_CA_CERTS as it starts and, at the first TLS, prints its own "Warning: Ignoring extra
 * certs from …" when the file is missing: a line in Node's words on every command that dials, from a setting
 * some machines carry for other programs. The host trusts only the certificate its mesh pinned, so no CA is
 * ever its concern: where the file cannot be read, the executable runs itself again without the variable
 * (signals passed on, its exit status its own). From a checkout (Node itself, not the executable) nothing
 * is done.
 */
function withoutExtraCerts(): boolean {
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  // a file Node can read loads without a word: only one it cannot costs the second process
  if (extra === undefined || readable(extra)) return false;
  const sea = process.getBuiltinModule?.("node:sea") as { isSea(): boolean } | undefined;
  if (!sea?.isSea()) return false;
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  const { spawn } = process.getBuiltinModule("node:child_process");
  const child = spawn(process.execPath, process.argv.slice(2), { env, stdio: "inherit" });
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => {
    const signo = signal ? (process.getBuiltinModule("node:os").constants.signals[signal] ?? 0) : 0;
    process.exitCode = code ?? 128 + signo;
  });
  child.on("error", (e) => {
    process.stderr.write(
      `mesh-host: could not start itself again without NODE_EXTRA_CA_CERTS: ${e.message}\n`,
    );
    process.exitCode = 1;
  });
  return true;
}

function readable(path: string): boolean {
  try {
    const fs = process.getBuiltinModule("node:fs");
    fs.accessSync(path, fs.constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** Run the CLI with `parts` (the executable's composition root's), its status the process's exit status. */
export function start(parts: HostParts): void {
  if (withoutExtraCerts()) return;
  main(process.argv.slice(2), parts).then((code) => {
    process.exitCode = code;
  });
}
