// The rollback launcher's test machine: an installed binary, a state directory, stand-in binaries that start and
// confirm, start and never confirm, or fail, on purpose, and a start that records what ran.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./tmp.ts";

/** Resolves once `ok()` holds, looking every 50 ms; the test's own timeout is the deadline. */
export async function until(ok: () => boolean): Promise<void> {
  while (!ok()) await new Promise((r) => setTimeout(r, 50));
}

export const LAUNCH = join(import.meta.dirname, "../../pkgbuild/launch");
/** dash is /bin/sh on Debian, mksh is Android's sh, bash is Arch's. */
export const SHELLS = ["dash", "mksh", "bash"].filter(
  (sh) => spawnSync("sh", ["-c", `command -v ${sh}`]).status === 0,
);
/** Each shell by its absolute path: one test runs the launcher with a PATH that lacks it. */
const SHELL_PATHS = new Map(
  SHELLS.map((sh) => [sh, spawnSync("sh", ["-c", `command -v ${sh}`], { encoding: "utf8" }).stdout.trim()]),
);
export const shellPath = (sh: string) => SHELL_PATHS.get(sh)!;

export type Behaviour = "confirm" | "unconfirmed" | "fail";

export interface Start {
  code: number | null;
  /** The stand-in that ran, or null when none did. */
  ran: string | null;
  stderr: string;
  env: Record<string, string>;
  argv: string[];
}

export const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/** The two files `mesh-host enrol` writes, in its order; the launcher looks only at whether they are there. */
export function enrol(state: string) {
  mkdirSync(state, { recursive: true });
  writeFileSync(join(state, "membership.json"), "{}\n");
  writeFileSync(join(state, "node.json"), "{}\n");
}

/** One machine: an installed binary, a state directory, and the stand-ins that can be installed. */
export function machine(
  shell: string,
  opts: { stateArg?: "space" | "equals" | "env"; enrolled?: boolean } = {},
) {
  const base = tempDir("mesh-launch-");
  const bin = join(base, "usr/bin/mesh-host");
  const state = join(base, "state");
  const log = join(base, "log");
  mkdirSync(join(base, "usr/bin"), { recursive: true });
  mkdirSync(join(base, "standins"));
  // what `mesh-host enrol` leaves: `launch run` waits for it (a test of its own leaves it out)
  if (opts.enrolled !== false) enrol(state);

  /** A stand-in: logs what it was started as, then behaves. Its name makes its digest its own. */
  function standIn(name: string, behaviour: Behaviour): string {
    const file = join(base, "standins", name);
    writeFileSync(
      file,
      [
        "#!/bin/sh",
        `# stand-in ${name}: ${behaviour}`,
        `{ printf 'ran=${name}\\n'; printf 'arg=%s\\n' "$@"; printf 'self=%s\\n' "$0"; printf 'umask=%s\\n' "$(umask)"`,
        `  env | grep '^MESH_HOST_'; printf 'end\\n'; } >> '${log}'`,
        behaviour === "confirm"
          ? // the host's part: once it "completed a reconcile", it writes its own binary's digest
            `d=$(sha256sum < "$0"); printf '%s\\n' "\${d%% *}" > '${state}/confirmed'; exit 0`
          : behaviour === "unconfirmed"
            ? "exit 0"
            : "exit 1",
        "",
      ].join("\n"),
    );
    chmodSync(file, 0o755);
    return file;
  }

  function install(file: string) {
    // a package upgrade replaces the file (a new inode), as pacman does
    rmSync(bin, { force: true });
    copyFileSync(file, bin);
    chmodSync(bin, 0o755);
  }

  function start(extraEnv: Record<string, string> = {}, args = ["run", "--flag", "a b"]): Start {
    const stateArgs =
      opts.stateArg === "equals" ? [`--state=${state}`] : opts.stateArg === "env" ? [] : ["--state", state];
    const before = existsSync(log) ? readFileSync(log, "utf8").length : 0;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      MESH_HOST_BIN: bin,
      ...extraEnv,
    };
    if (opts.stateArg === "env") env.MESH_HOST_STATE = state;
    const r = spawnSync(shellPath(shell), [LAUNCH, ...args, ...stateArgs], { env, encoding: "utf8" });
    const record = existsSync(log) ? readFileSync(log, "utf8").slice(before) : "";
    const lines = record.split("\n").filter(Boolean);
    const ranLine = lines.find((l) => l.startsWith("ran="));
    const envOf = Object.fromEntries(
      lines
        .filter((l) => l.startsWith("MESH_HOST_"))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    return {
      code: r.status,
      ran: ranLine ? ranLine.slice(4) : null,
      stderr: r.stderr,
      env: {
        ...envOf,
        self: lines.find((l) => l.startsWith("self="))?.slice(5) ?? "",
        umask: lines.find((l) => l.startsWith("umask="))?.slice(6) ?? "",
      },
      argv: lines.filter((l) => l.startsWith("arg=")).map((l) => l.slice(4)),
    };
  }

  /** `n` starts; the names of what ran, in order. */
  function starts(n: number, env: Record<string, string> = {}): (string | null)[] {
    return Array.from({ length: n }, () => start(env).ran);
  }

  const launcherState = (): Record<string, string> =>
    Object.fromEntries(
      readFileSync(join(state, "launcher/state"), "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
  const note = () => {
    const file = join(state, "rollback-note");
    return existsSync(file) ? readFileSync(file, "utf8") : null;
  };

  return { base, bin, state, standIn, install, start, starts, launcherState, note };
}
