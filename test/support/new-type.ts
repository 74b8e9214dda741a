// A new resource type, added to a copy of src/ the way a newcomer would add one: its schema in the vocabulary's
// Resource union, its one applier file and a line in the host's list, nothing else. test/architecture.test.ts
// typechecks the copy and applies the type through the copy's own CLI, so "three files" is held, not told.
import { execFile } from "node:child_process";
import {
  cpSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ROOT } from "./layers.ts";

/** The three files, from the repository root: its kind (beside the others), its applier, its family's list. */
export const NEW_TYPE_FILES = [
  "src/vocabulary/resources.ts",
  "src/appliers/portable/marker.ts",
  "src/appliers/portable/index.ts",
] as const;

const SCHEMA = `
/** marker: a file holding one line of text or a secret (a type added by test/support/new-type.ts). */
export const MarkerResource = z.lazy(() =>
  z.strictObject({
    ...base,
    type: z.literal("marker"),
    path: AbsPath,
    text: z.string().optional(),
    secret: Name.optional(),
    after: z.array(Name).optional(),
    label: Name.optional(),
    takes: z.boolean().optional(),
  }),
);
export type MarkerResource = z.infer<typeof MarkerResource>;
`;

/**
 * The marker's kind: its path (which it makes), a label no two markers share, the secret it reads, the ids it
 * names, and that it is held on an adopted node.
 */
const KIND = `  marker: kind("marker", MarkerResource, {
    pathsOf: (r) => [r.path],
    madeOf: (r) => [r.path],
    uniqueKeysOf: (r) =>
      r.label === undefined
        ? []
        : [{ space: "marker label", key: r.label, field: "label", clash: (e) => \`is also the label of "\${e}"\` }],
    pathIsFile: true,
    secretsOf: (r) => named("secret", r.secret === undefined ? [] : [r.secret]),
    refsOf: (r) => named("after", r.after),
    adopted: { takes },
  }),
`;

const APPLIER = `// marker: a file holding one line of text or a secret, written whole, removed when undeclared.
import * as z from "zod";
import { DEFAULT_DIR_MODE, DEFAULT_FILE_MODE } from "../../defaults.ts";
import { readFileAt, removeFileAt, writeFileAt } from "../../system/index.ts";
import { executeBy, failsAgain, stepsOf } from "../step.ts";
import { type Applier, type Executors, recordOf, type ResourceOf, type StepOf } from "../types.ts";

// the vocabulary's door names what it lets through: the type is read off the Resource union instead
type MarkerResource = ResourceOf<"marker">;

const MarkerRecord = recordOf("marker", { path: z.string() });
type MarkerRecord = z.infer<typeof MarkerRecord>;

type MarkerStep =
  | StepOf<"write", { path: string; bytes: Uint8Array }>
  | StepOf<"remove", { path: string }>
  | StepOf<"none" | "refuse">;

const step = stepsOf<MarkerStep>("marker");

const executors: Executors<MarkerStep, MarkerResource, MarkerRecord> = {
  write: async (s, _wanted, _record, ctx) => {
    const { path, bytes } = s.data;
    await writeFileAt(ctx.ports.root, path, bytes, { mode: DEFAULT_FILE_MODE, dirMode: DEFAULT_DIR_MODE });
    return { did: s.did, detail: s.detail, record: { type: "marker", path } };
  },
  none: async (s, _wanted, record) => ({ did: s.did, detail: s.detail, record: record ?? null }),
  remove: async (s, _wanted, _record, ctx) => {
    removeFileAt(ctx.ports.root, s.data.path);
    return { did: "removed", detail: s.detail, record: null };
  },
  refuse: failsAgain,
};

export const markerApplier: Applier<MarkerResource, MarkerRecord, MarkerStep> = {
  type: "marker",
  recordSchema: MarkerRecord,
  traits: {
    writesFiles: true,
    pathOf: (record) => record.path,
    found: async (wanted, ctx) => (await readFileAt(ctx.ports.root, wanted.path)) !== null,
  },

  async decide(wanted, record, ctx) {
    const { id, path, secret, text } = wanted;
    const bytes = secret === undefined ? Buffer.from(text ?? "", "utf8") : ctx.secret(secret);
    const found = await readFileAt(ctx.ports.root, path);
    if (typeof found === "string") return step(id, "failed", "refuse", found);
    if (found && Buffer.compare(Buffer.from(found.bytes), Buffer.from(bytes)) === 0)
      return step(id, "unchanged", "none", \`\${path} is as declared\`);
    return step(id, record ? "updated" : "created", "write", \`\${path} written\`, { path, bytes });
  },

  async decideRemoval(id, record) {
    return step(id, "removed", "remove", \`\${record.path} removed\`, { path: record.path });
  },

  execute: executeBy(executors),
};
`;

/** `text` with `add` put right after `anchor`, which must be there exactly once. */
function after(text: string, anchor: string, add: string, file: string): string {
  const at = text.indexOf(anchor);
  if (at < 0 || text.indexOf(anchor, at + 1) >= 0)
    throw new Error(
      `${file}: "${anchor}" is not there exactly once: say in new-type.ts where a type is added now`,
    );
  return text.slice(0, at + anchor.length) + add + text.slice(at + anchor.length);
}

/** A copy of src/ (node_modules beside it) with the marker type added in exactly NEW_TYPE_FILES. */
export function copyWithNewType(): string {
  const dir = mkdtempSync(join(tmpdir(), "mesh-new-type-"));
  // src/ and what it needs from beside it: the package's embedded files, and package.json (an ES module)
  for (const d of ["src", "pkgbuild", "package.json"])
    cpSync(join(ROOT, d), join(dir, d), { recursive: true });
  symlinkSync(realpathSync(join(ROOT, "node_modules")), join(dir, "node_modules"));
  const tsconfig = JSON.parse(readFileSync(join(ROOT, "tsconfig.json"), "utf8"));
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ ...tsconfig, include: ["src", "pkgbuild"] }));
  const [vocabulary, applier, list] = NEW_TYPE_FILES.map((f) => join(dir, f)) as [string, string, string];
  let v = readFileSync(vocabulary, "utf8");
  v = after(v, "\nconst base = { id: Name };\n", SCHEMA, NEW_TYPE_FILES[0]);
  v = after(v, "export const KINDS = {\n", KIND, NEW_TYPE_FILES[0]);
  writeFileSync(vocabulary, v);
  writeFileSync(applier, APPLIER);
  let l = readFileSync(list, "utf8");
  l = after(
    l,
    'import type { ApplierList } from "../types.ts";\n',
    'import { markerApplier } from "./marker.ts";\n',
    NEW_TYPE_FILES[2],
  );
  l = after(
    l,
    "export const PORTABLE_APPLIERS: ApplierList = {\n",
    "  marker: registered(markerApplier),\n",
    NEW_TYPE_FILES[2],
  );
  writeFileSync(list, l);
  return dir;
}

/** Every file under `dir`/src whose bytes differ from the repository's (or that the repository lacks). */
export function changedFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(join(dir, d), { withFileTypes: true })) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else {
        let same = false;
        try {
          same = readFileSync(join(ROOT, p)).equals(readFileSync(join(dir, p)));
        } catch {
          // not in the repository: a new file
        }
        if (!same) out.push(p);
      }
    }
  };
  walk("src");
  return out.sort();
}

const run = promisify(execFile);

/** The compiler over the copy: its errors, or "" when it typechecks. */
export async function typecheck(dir: string): Promise<string> {
  const tsc = join(ROOT, "node_modules/typescript/bin/tsc");
  try {
    await run(process.execPath, [tsc, "--noEmit", "-p", dir], { cwd: dir });
    return "";
  } catch (e) {
    return (e as { stdout?: string }).stdout || String(e);
  }
}

/** The copy's own CLI (through tsx, as the tests run the sources), its exit status, stdout and stderr. */
export async function copyCli(
  dir: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const tsx = join(ROOT, "node_modules/tsx/dist/cli.mjs");
  try {
    const { stdout, stderr } = await run(process.execPath, [tsx, join(dir, "src/cli/main.ts"), ...args], {
      cwd: dir,
    });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof err.code === "number" ? err.code : -1,
      stdout: err.stdout ?? "",
      stderr: err.stderr ?? "",
    };
  }
}

/** What the copy's `mesh push` composes for one node (its real `compose`, sealing to a fresh key), or its refusal. */
const PUSH_SCRIPT = `
import { generateKeyPairSync } from "node:crypto";
import { compose } from "./src/mesh/push.ts";
import { unseal } from "./src/vocabulary/index.ts";
const [file, given] = JSON.parse(process.argv[2]);
const raw = (k) => Buffer.from(k.export({ format: "jwk" }).x, "base64url").toString("base64");
const identity = generateKeyPairSync("ed25519").publicKey;
const sealing = generateKeyPairSync("x25519");
const keys = { identity: raw(identity), sealing: raw(sealing.publicKey), overlay: raw(sealing.publicKey) };
const record = { node: "n1", keys, serial: 0 };
const secrets = new Map(Object.entries(given).map(([k, v]) => [k, Buffer.from(v)]));
try {
  const body = JSON.parse(compose(record, { file, secrets }).body);
  const opened = Object.fromEntries(
    Object.entries(body.secrets).map(([k, v]) => [k, unseal(v, sealing.privateKey).bytes.toString()]),
  );
  console.log(JSON.stringify({ body, opened }));
} catch (e) {
  console.log(JSON.stringify({ refused: e.message }));
}
`;

export async function copyPush(
  dir: string,
  file: Record<string, unknown>,
  given: Record<string, string>,
): Promise<{ body?: Record<string, unknown>; opened?: Record<string, string>; refused?: string }> {
  writeFileSync(join(dir, "push-check.ts"), PUSH_SCRIPT);
  const tsx = join(ROOT, "node_modules/tsx/dist/cli.mjs");
  const args = [tsx, join(dir, "push-check.ts"), JSON.stringify([file, given])];
  const { stdout } = await run(process.execPath, args, { cwd: dir });
  return JSON.parse(stdout);
}
