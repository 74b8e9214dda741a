// What every command starts from: the host for this machine, the state directory, the ports.
import { readFileSync, statSync } from "node:fs";
import { localExec } from "../appliers/index.ts";
import type { Unseal } from "../apply/index.ts";
import { DEFAULT_ANDROID_STATE_DIR, MAX_BODY_BYTES } from "../defaults.ts";
import { detectHostKind, type Host, makeHost } from "../hosts/index.ts";
import { State, StoreHolds } from "../store/index.ts";
import {
  type Declaration,
  INSTALLER_SECRET,
  parseDeclarationBody,
  type Refusal,
  refusalLine,
} from "../vocabulary/index.ts";
import { type Args, UsageError } from "./args.ts";
import { type Log, makeLog } from "./log.ts";
import { type GivenSecrets, readGivenSecrets, unsealerFor } from "./unseal.ts";

export interface Context {
  args: Args;
  host: Host;
  state: State;
  holds: StoreHolds;
  log: Log;
  rootless: boolean;
  /** What `--secret NAME=FILE` gave: only a bundle naming them `"installer"` may use them. */
  given: GivenSecrets;
  unseal: Unseal;
}

export function makeContext(args: Args): Context {
  const host = makeHost(args.host ?? detectHostKind());
  const stateDir = !args.stateGiven && host.kind === "android" ? DEFAULT_ANDROID_STATE_DIR : args.state;
  try {
    if (!statSync(args.root).isDirectory()) throw new Error();
  } catch {
    throw new UsageError(`--root ${args.root} is not a directory`);
  }
  const state = new State(stateDir);
  const rootless = typeof process.getuid === "function" && process.getuid() !== 0;
  const given = readGivenSecrets(args.secret);
  return {
    args,
    host,
    state,
    holds: new StoreHolds(state),
    log: makeLog(),
    rootless,
    given,
    unseal: unsealerFor(state, given),
  };
}

export function portsOf(ctx: Context) {
  return {
    root: ctx.args.root,
    exec: localExec(),
    rootless: ctx.rootless,
    log: ctx.log,
    stateDir: ctx.state.dir,
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
  let bytes: Buffer;
  try {
    const size = statSync(path).size;
    if (size > MAX_BODY_BYTES)
      throw new UsageError(`${path} is ${size} bytes, more than the ${MAX_BODY_BYTES} allowed`);
    bytes = readFileSync(path);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const parsed = parseDeclarationBody(bytes, host.support);
  if (!parsed.ok) throw new Refused(parsed.refusals);
  return { declaration: parsed.value, bytes };
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
