// Sealed values are opened with the node's sealing key, only to be written where they are declared; a bundle's
// installer secrets are the values genesis was given, read from files and never kept anywhere but where declared.
import { readFileSync, statSync } from "node:fs";
import type { Unseal } from "../apply/index.ts";
import { MAX_INSTALLER_SECRET_BYTES } from "../defaults.ts";
import { loadKeys, type State } from "../store/index.ts";
import { INSTALLER_SECRET, nameProblem, unseal } from "../vocabulary/index.ts";
import { UsageError } from "./args.ts";

/** What `--secret NAME=FILE` gave, by name: the value alone. */
export type GivenSecrets = ReadonlyMap<string, Uint8Array>;

/** Keys are read only when a declaration names a sealed secret, and never leave this closure. */
export function unsealerFor(state: State, given: GivenSecrets = new Map()): Unseal {
  return (sealed, name) => {
    if (sealed === INSTALLER_SECRET) {
      const value = name === undefined ? undefined : given.get(name);
      if (value) return { ok: true, bytes: value };
      return {
        ok: false,
        reason: `is the installer's, and none was given (--secret ${name}=FILE, to genesis or to the offline path)`,
      };
    }
    const keys = loadKeys(state.dir);
    if (!keys.ok)
      return { ok: false, reason: "cannot be unsealed: this node has no sealing key (enrol it first)" };
    return unseal(sealed, keys.keys.sealing.privateKey);
  };
}

/**
 * The value alone: one trailing line ending is not part of it. `echo value > file` is how an installer writes a
 * secret, and the mesh later seals the bare value for the same file; a newline kept here would make the two
 * differ, and a container reading the file would be recreated the day the mesh takes it over (seed: hq 103).
 */
export function valueAlone(bytes: Uint8Array): Uint8Array {
  const b = Buffer.from(bytes);
  if (b.length >= 2 && b[b.length - 2] === 0x0d && b[b.length - 1] === 0x0a) return b.subarray(0, -2);
  if (b.length >= 1 && b[b.length - 1] === 0x0a) return b.subarray(0, -1);
  return b;
}

/** `--secret NAME=FILE`, each read now; a refusal names the flag and the file, never what is in it. */
export function readGivenSecrets(flags: readonly string[]): Map<string, Uint8Array> {
  const given = new Map<string, Uint8Array>();
  for (const flag of flags) {
    const eq = flag.indexOf("=");
    if (eq <= 0 || eq === flag.length - 1) throw new UsageError(`--secret must be NAME=FILE, not "${flag}"`);
    const name = flag.slice(0, eq);
    const file = flag.slice(eq + 1);
    const bad = nameProblem(name);
    if (bad) throw new UsageError(`--secret name "${name}" ${bad}`);
    if (given.has(name)) throw new UsageError(`--secret ${name} is given twice`);
    given.set(name, readValue(name, file));
  }
  return given;
}

function readValue(name: string, file: string): Uint8Array {
  let bytes: Buffer;
  try {
    const size = statSync(file).size;
    if (size > MAX_INSTALLER_SECRET_BYTES)
      throw new UsageError(
        `--secret ${name}: ${file} is ${size} bytes, more than ${MAX_INSTALLER_SECRET_BYTES}`,
      );
    bytes = readFileSync(file);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(
      `--secret ${name}: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  const value = valueAlone(bytes);
  if (value.length === 0) throw new UsageError(`--secret ${name}: ${file} is empty`);
  return value;
}
