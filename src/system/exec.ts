// The one way anything is run: argv without a shell, a timeout, output kept as a tail.
import { ACTION_OUTPUT_TAIL_BYTES } from "../defaults.ts";
import { errnoWords } from "../faults.ts";

/** The outcome of running a command; never thrown, so a failure is a value the report can carry. */
export interface ExecResult {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** Set when the program could not be started at all (ENOENT, EACCES). */
  spawnError?: string;
}

export interface ExecOptions {
  env?: Record<string, string>;
  timeoutMs?: number;
  cwd?: string;
  input?: string | Uint8Array;
  /** Open fds the program inherits as its fd 3, 4, …: a file handed over as /dev/fd/N, never by name. */
  fds?: number[];
}

/** The narrow command port: appliers reach systemctl, pacman and actions only through it. */
export interface Exec {
  run(argv: string[], opts?: ExecOptions): Promise<ExecResult>;
}

const BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** Why `program` could not be started, in words: a missing program says where it was looked for (never ENOENT alone). */
export function startWords(program: string, code: string | undefined, searchPath: string): string {
  if (code === "ENOENT")
    return program.includes("/")
      ? `${program} does not exist`
      : `no program "${program}" on the search path (${searchPath})`;
  if (code === "EACCES") return `${program} is not executable (permission denied)`;
  return `${program}: ${errnoWords(code)}`;
}

/** Keeps only the last `max` bytes of a stream. */
class Tail {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size - (this.chunks[0]?.length ?? 0) >= this.max && this.chunks.length > 1)
      this.size -= this.chunks.shift()!.length;
  }
  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.max)).toString("utf8");
  }
}

export function localExec(tailBytes = ACTION_OUTPUT_TAIL_BYTES * 32): Exec {
  return {
    run(argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
      return new Promise((resolve) => {
        const [program, ...args] = argv;
        const env = { PATH: process.env.PATH ?? BASE_PATH, ...opts.env };
        // node:child_process (and node:net under it) loaded at the first command, not at start-up (issue 22)
        const child = process.getBuiltinModule("node:child_process").spawn(program!, args, {
          env,
          cwd: opts.cwd,
          stdio: ["pipe", "pipe", "pipe", ...(opts.fds ?? [])],
          detached: true,
        });
        const out = new Tail(tailBytes);
        const err = new Tail(tailBytes);
        let timedOut = false;
        const timer = opts.timeoutMs
          ? setTimeout(() => {
              timedOut = true;
              // the whole process group: an action's children must not outlive its timeout
              try {
                process.kill(-child.pid!, "SIGKILL");
              } catch {
                child.kill("SIGKILL");
              }
            }, opts.timeoutMs)
          : undefined;
        child.stdout!.on("data", (c: Buffer) => out.push(c));
        child.stderr!.on("data", (c: Buffer) => err.push(c));
        child.stdin!.on("error", () => {});
        child.stdin!.end(opts.input ?? "");
        child.on("error", (e: NodeJS.ErrnoException) => {
          clearTimeout(timer);
          resolve({
            code: null,
            signal: null,
            stdout: "",
            stderr: "",
            timedOut,
            spawnError: startWords(program!, e.code, env.PATH ?? BASE_PATH),
          });
        });
        child.on("close", (code, signal) => {
          clearTimeout(timer);
          resolve({ code, signal, stdout: out.text(), stderr: err.text(), timedOut });
        });
      });
    },
  };
}
