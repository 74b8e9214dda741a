// What every command starts from: the host for this machine, the state directory, the ports.
import { readFileSync, readSync, statSync } from "node:fs";
import type { Unseal } from "../apply/index.ts";
import { DEFAULT_ANDROID_STATE_DIR, MAX_BODY_BYTES } from "../defaults.ts";
import { deniedFault, errnoWords, faultLine } from "../faults.ts";
import { detectHostKind } from "../host-kind.ts";
import { type Host, makeHost } from "../hosts/index.ts";
import { OverlayState, State, StoreOriginals, stateFault } from "../store/index.ts";
import { localExec } from "../system/index.ts";
import {
  type Declaration,
  INSTALLER_SECRET,
  parseDeclarationBody,
  type Refusal,
  refusalLine,
  sizeWords,
  tooBig,
} from "../vocabulary/index.ts";
import { type Args, UsageError } from "./args.ts";
import { type Log, makeLog } from "./log.ts";
import type { HostParts } from "./parts.ts";
import { type GivenSecrets, readGivenSecrets, unsealerFor } from "./unseal.ts";

export interface Context {
  args: Args;
  host: Host;
  /** What this executable's composition root handed in: its appliers, and the parts only some hosts have. */
  parts: HostParts;
  state: State;
  originals: StoreOriginals;
  log: Log;
  rootless: boolean;
  /** What `--secret NAME=FILE` gave: only a bundle naming them `"installer"` may use them. */
  given: GivenSecrets;
  unseal: Unseal;
}

export async function makeContext(args: Args, parts: HostParts): Promise<Context> {
  const kind = args.host ?? detectHostKind();
  const host = makeHost(kind, await parts.appliers(kind));
  const stateDir = !args.stateGiven && host.kind === "android" ? DEFAULT_ANDROID_STATE_DIR : args.state;
  rootIsDirectory(args.root);
  stateIsDirectory(stateDir);
  const log = makeLog({ format: args.logFormat });
  const state = new State(stateDir);
  const rootless = typeof process.getuid === "function" && process.getuid() !== 0;
  const given = readGivenSecrets(args.secret);
  return {
    args,
    host,
    parts,
    state,
    originals: new StoreOriginals(state),
    log,
    rootless,
    given,
    unseal: unsealerFor(state, given),
  };
}

/** A --root that is no directory, or that this user may not reach, is refused in its own words. */
function rootIsDirectory(root: string): void {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(root);
  } catch (e) {
    // permission denied was once worded "is not a directory": the answer to it is who runs the command
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new UsageError(`--root ${root} does not exist`);
    if (deniedFault(e))
      throw new UsageError(
        `--root ${root}: permission denied; run as root, or give a --root this user may read`,
      );
    throw new UsageError(`--root ${root}: ${errnoWords(code)}`);
  }
  if (!st.isDirectory()) throw new UsageError(`--root ${root} is not a directory`);
}

/** A --state that names a file (or lies under one) is refused before anything reads a path inside it. */
function stateIsDirectory(dir: string): void {
  let st: ReturnType<typeof statSync> | undefined;
  try {
    st = statSync(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return;
    if (code === "ENOTDIR")
      throw new UsageError(`--state ${dir} is not a directory (a part of it is a file)`);
    throw stateFault(e);
  }
  if (!st.isDirectory()) throw new UsageError(`--state ${dir} is not a directory`);
}

export function portsOf(ctx: Context) {
  return {
    root: ctx.args.root,
    exec: localExec(),
    rootless: ctx.rootless,
    log: ctx.log,
    // the overlay's files in the state directory: the Android bundle leaves them out (it has no overlay)
    overlay: ctx.host.kind === "android" ? undefined : new OverlayState(ctx.state),
  };
}

/** A refusal as one line, and as an error that exits 2. */
export class Refused extends Error {
  constructor(readonly refusals: Refusal[]) {
    super(
      refusals.length > 1
        ? `${refusalLine(refusals[0]!)} (and ${refusals.length - 1} more)`
        : refusalLine(refusals[0]!),
    );
  }
}

/** A declaration file: read with its size checked first, then parsed and refused field by field. */
export function readDeclarationFile(path: string, host: Host): { declaration: Declaration; bytes: Buffer } {
  const bytes = path === "-" ? readStdin() : readSized(path);
  const parsed = parseDeclarationBody(bytes, host.support);
  if (!parsed.ok) throw new Refused(parsed.refusals);
  return { declaration: parsed.value, bytes };
}

function readSized(path: string): Buffer {
  try {
    const size = statSync(path).size;
    if (size > MAX_BODY_BYTES) throw new UsageError(`${path} is ${tooBig(size, MAX_BODY_BYTES)}`);
    return readFileSync(path);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(faultLine(e, "read") ?? `cannot read ${path}`);
  }
}

/** `-`: the declaration on standard input, read to its end, refused past the size limit without reading it all. */
function readStdin(): Buffer {
  const chunks: Buffer[] = [];
  const chunk = Buffer.allocUnsafe(64 * 1024);
  let total = 0;
  for (;;) {
    let n: number;
    try {
      n = readSync(0, chunk);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EAGAIN") {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        continue;
      }
      if (code === "EOF") break;
      throw new UsageError(`cannot read standard input: ${faultLine(e) ?? code ?? "unreadable"}`);
    }
    if (n === 0) break;
    total += n;
    if (total > MAX_BODY_BYTES)
      throw new UsageError(`standard input is more than the ${sizeWords(MAX_BODY_BYTES)} allowed`);
    chunks.push(Buffer.from(chunk.subarray(0, n)));
  }
  if (!total) throw new UsageError("standard input is empty: give the declaration there, or a FILE");
  return Buffer.concat(chunks);
}

/**
 * Every `--secret` given must be one the bundle names as the installer's: a misspelt name would otherwise leave
 * the file it was meant for refused, or worse, a value given for nothing.
 */
export function checkGiven(ctx: Context, declaration: Declaration): void {
  for (const name of ctx.given.keys())
    if (declaration.secrets?.[name] !== INSTALLER_SECRET)
      throw new UsageError(`--secret ${name}: the declaration names no installer secret "${name}"`);
}
