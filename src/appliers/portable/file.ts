// file: written atomically, read back by digest and mode; what was found is held, never lost.

import * as z from "zod";
import { DEFAULT_FILE_MODE } from "../../defaults.ts";
import {
  idsField,
  octal,
  ownerIgnored,
  parseMode,
  placeProblem,
  placeRefuses,
  readFileAt,
  removeFileAt,
  resolveIds,
  sha256,
  writeFileAt,
} from "../../system/index.ts";
import type { FileResource } from "../../vocabulary/index.ts";
import { executeBy, failsAgain, forgets, keeps, stepsOf } from "../step.ts";
import {
  type Applier,
  type DecideContext,
  type Executed,
  type Executors,
  recordOf,
  type StepOf,
} from "../types.ts";
import { type Claim, claimOf } from "./claim.ts";
import { fileDiff } from "./file-diff.ts";
import {
  keptParents,
  madeParents,
  makingWords,
  missingParents,
  parentMaker,
  removeParents,
  removingWords,
} from "./parents.ts";

export const FileRecord = recordOf("file", {
  path: z.string(),
  /** True when the mesh made the file; false when it was found (and its original held). */
  created: z.boolean(),
  /** SHA-256 of what the host last wrote: a digest, never the content (it may be a secret). */
  wrote: z.string(),
  mode: z.string().optional(),
  /** The parent directories the host made for it (absent before): removed with it when empty. */
  parents: z.array(z.string()).optional(),
});
export type FileRecord = z.infer<typeof FileRecord>;

interface Found {
  sha: string;
  mode: number;
  uid: number;
  gid: number;
  bytes: Uint8Array;
}

export interface WriteData {
  bytes: Uint8Array;
  sha: string;
  mode: number;
  uid?: number;
  gid?: number;
  /** The found content to hold before it is overwritten. */
  hold?: Found;
  /** The record this id will have once written: journalled before anything is touched. */
  intent: FileRecord;
  /** Filled from a secret: no digest of it, nor of the original it replaces, is ever said. */
  secret: boolean;
}

/** Found already right: kept as it is, taken over (`adopt`, holding what was found) or claimed from another id. */
interface KeptData {
  hold?: Found;
  sha: string;
  intent: FileRecord;
  secret: boolean;
}

/** A take-over: what was found is held, so the step carries it. */
type AdoptData = KeptData & { hold: Found };

/** A give-back: the record it gives back, named in the step (balena-supervisor's `current`). */
interface GiveBackData {
  record: FileRecord;
}

/**
 * The file applier's steps, keyed by action: each executor below is handed its own, and each carries what its
 * executor reads (the path in the record it will keep or gives back), so no executor guesses at it.
 */
export type FileStep =
  | StepOf<"none" | "claim", KeptData>
  | StepOf<"adopt", AdoptData>
  | StepOf<"write", WriteData>
  | StepOf<"remove" | "restore", GiveBackData>
  | StepOf<"forget" | "fail" | "refuse">;

/** What is at declared `path` now: a regular file's digest and mode, null when absent, or why it cannot be managed. */
async function readFound(root: string, path: string, fresh = false): Promise<Found | null | string> {
  const read = await readFileAt(root, path, fresh);
  if (read === null || typeof read === "string") return read;
  return { ...read, sha: sha256(read.bytes) };
}

function wantedBytes(wanted: FileResource, ctx: DecideContext): Uint8Array {
  if (wanted.content !== undefined) return Buffer.from(wanted.content, "utf8");
  if (wanted.content_b64 !== undefined) return Buffer.from(wanted.content_b64, "base64");
  return ctx.secret(wanted.secret!);
}

const step = stepsOf<FileStep>("file");

/** What is in the way at `path` fails this step alone (never followed); a path no host may act on refuses. */
const blocked = (wanted: { id: string }, path: string, detail: string) =>
  step(wanted.id, "failed", placeRefuses(path) ? "refuse" : "fail", detail);

/** Which word describes writing over what is there: put back, changed by the mesh, or made. */
function writeDid(found: Found | null, record: Claim | undefined, sha: string, mode: string | undefined) {
  // a pending record is one an interrupted apply journalled and never wrote: nothing was there to repair
  if (record && !record.pending && record.wrote === sha && record.mode === mode) return "repaired" as const;
  return found || record?.created === false ? ("updated" as const) : ("created" as const);
}

/** One executor per action of FileStep. */
const executors: Executors<FileStep, FileResource, FileRecord> = {
  none: keeps,
  claim: async (step) => ({ did: "unchanged", detail: step.detail, record: step.data.intent }),
  adopt: async (step, _wanted, _record, ctx) => {
    const { hold, intent, secret } = step.data;
    await ctx.ports.originals.keep(intent.path, hold.bytes, hold, secret);
    return { did: "unchanged", detail: step.detail, record: intent };
  },
  write: async (step, _wanted, _record, ctx) => writeAndReadBack(step, step.data.intent.path, ctx),
  remove: async (step, _wanted, _record, ctx) => {
    const { record } = step.data;
    removeFileAt(ctx.ports.root, record.path);
    const detail = `${step.detail.split("; then ")[0]}${removeParents(record.parents, ctx)}`;
    return { did: "removed", detail, record: null };
  },
  restore: async (step, _wanted, _record, ctx) => restoreOriginal(step, step.data.record.path, ctx),
  forget: forgets,
  fail: failsAgain,
  refuse: failsAgain,
};

export const fileApplier: Applier<FileResource, FileRecord, FileStep> = {
  recordSchema: FileRecord,
  type: "file",
  traits: {
    writesFiles: true,
    secretAt: (wanted) => (wanted.secret === undefined ? undefined : wanted.path),
    // a give-back journals nothing: only a step that keeps a record (and may hold what it found) does
    journal: ({ data }) =>
      data && "intent" in data
        ? {
            intent: data.intent,
            original: data.hold && {
              path: data.intent.path,
              bytes: data.hold.bytes,
              meta: { mode: data.hold.mode, uid: data.hold.uid, gid: data.hold.gid },
              secret: data.secret,
            },
          }
        : {},
    pathOf: (record) => record.path,
    wrote: (record) => record.wrote || undefined,
    diff: async (step, wanted, root) =>
      step.action === "write" && wanted ? fileDiff(step.data, wanted, root) : undefined,
  },

  async decide(wanted, record, ctx) {
    const { root, rootless } = ctx.ports;
    const problem = placeProblem(root, wanted.path);
    if (problem) return blocked(wanted, wanted.path, problem);
    const found = await readFound(root, wanted.path);
    if (typeof found === "string") return blocked(wanted, wanted.path, found);
    const ids = rootless ? {} : resolveIds(root, wanted.owner, wanted.group);
    // the field that did not resolve is blamed, never `path`
    if (typeof ids === "string") return step(wanted.id, "failed", "refuse", ids, undefined, idsField(ids));
    const bytes = wantedBytes(wanted, ctx);
    const sha = sha256(bytes);
    const mode = parseMode(wanted.mode) ?? found?.mode ?? DEFAULT_FILE_MODE;
    const ignored = ownerIgnored(rootless, wanted);
    const matches =
      found !== null &&
      found.sha === sha &&
      found.mode === mode &&
      (ids.uid === undefined || ids.uid === found.uid) &&
      (ids.gid === undefined || ids.gid === found.gid);
    // a path another id recorded is the mesh's already: never taken as found
    const prior: Claim | undefined = record ?? claimOf(ctx, wanted.path, wanted.id);
    if (matches) {
      // found already right and never recorded: take it over (holding it) without writing
      // a record that does not say what is there (a kill after the write, before the records were saved) is set right
      const current = record && !record.pending && record.wrote === sha && record.mode === wanted.mode;
      const action = current ? "none" : prior ? "claim" : "adopt";
      const intent: FileRecord = {
        type: "file",
        path: wanted.path,
        created: prior?.created ?? false,
        wrote: sha,
        mode: wanted.mode,
        parents: record?.parents,
      };
      // only a take-over holds what it found: an unchanged file of the mesh's own is no original
      const secret = wanted.secret !== undefined;
      const detail = `${wanted.path} is as declared${ignored}`;
      if (action === "adopt")
        return step(wanted.id, "unchanged", action, detail, { hold: found, sha, intent, secret });
      return step(wanted.id, "unchanged", action, detail, { sha, intent, secret });
    }
    return writeStep(wanted, { found, record, prior }, { bytes, sha, mode, ...ids }, ctx, ignored);
  },

  async decideRemoval(id, record, ctx) {
    const { root } = ctx.ports;
    const problem = placeProblem(root, record.path);
    if (problem) return blocked({ id }, record.path, problem);
    if (ctx.declaredPaths.has(record.path))
      return step(id, "unchanged", "forget", `${record.path} is now declared by another resource`);
    const found = await readFound(root, record.path);
    if (!record.created)
      return step(id, "restored", "restore", `${record.path} given back its original`, { record });
    if (found === null)
      return step(id, "unchanged", "forget", `${record.path} was already gone: nothing was removed`);
    if (typeof found === "string")
      return step(id, "unchanged", "forget", `${record.path} left in place: ${found}`);
    if (found.sha !== record.wrote)
      return step(
        id,
        "unchanged",
        "forget",
        `${record.path} left in place: changed by hand since the mesh wrote it`,
      );
    const parents = removingWords(record.parents, ctx);
    return step(id, "removed", "remove", `${record.path} removed (the mesh created it)${parents}`, {
      record,
    });
  },

  execute: executeBy(executors),
};

/** The write that makes `path` as declared: the word for it, what it holds first, and the parents it makes. */
function writeStep(
  wanted: FileResource,
  seen: { found: Found | null; record: FileRecord | undefined; prior: Claim | undefined },
  w: { bytes: Uint8Array; sha: string; mode: number; uid?: number; gid?: number },
  ctx: DecideContext,
  ignored: string,
): FileStep {
  const { found, record, prior } = seen;
  const did = writeDid(found, prior, w.sha, wanted.mode);
  // the first original is the record's; content found later at a held path is kept once beside it
  const hold = found && !prior?.created && found.sha !== prior?.wrote ? found : undefined;
  const what =
    did === "repaired"
      ? "put back after a change the mesh did not make"
      : did === "created"
        ? "created"
        : "rewritten";
  const held = hold && !record ? "; the original is held" : "";
  const created = prior ? prior.created : hold === undefined;
  const made = found === null ? madeParents(ctx, missingParents(ctx.ports.root, wanted.path)) : [];
  const parents = keptParents(record?.parents, made);
  const intent: FileRecord = {
    type: "file",
    path: wanted.path,
    created,
    wrote: w.sha,
    mode: wanted.mode,
    parents,
  };
  const data: WriteData = { ...w, hold, intent, secret: wanted.secret !== undefined };
  const making = makingWords(ctx, wanted.id, made);
  return step(wanted.id, did, "write", `${wanted.path} ${what}${making}${held}${ignored}`, data);
}

async function writeAndReadBack(
  step: StepOf<"write", WriteData>,
  path: string,
  ctx: DecideContext,
): Promise<Executed<FileRecord>> {
  const { data } = step;
  if (data.hold) await ctx.ports.originals.keep(path, data.hold.bytes, data.hold, data.secret);
  const { root } = ctx.ports;
  const { mode, uid, gid } = data;
  await writeFileAt(root, path, data.bytes, { mode, uid, gid, dirMode: parentMaker(ctx) });
  // read back where the declared path is now, walked afresh: a swap since the write is seen, not trusted
  const back = await readFound(root, path, true);
  const next: FileRecord = data.intent;
  if (typeof back !== "object" || back === null || back.sha !== data.sha || back.mode !== data.mode)
    return {
      did: "failed",
      detail: `${path} read back differently from what was written`,
      record: next,
    };
  // a secret's digest, even 12 hex of it, is an offline guessing oracle for a weak secret
  const digest = data.secret ? "" : ` sha256:${back.sha.slice(0, 12)}`;
  return {
    did: step.did,
    detail: `${step.detail}; read back ${octal(back.mode)}${digest}`,
    record: next,
  };
}

async function restoreOriginal(
  step: FileStep,
  path: string,
  ctx: DecideContext,
): Promise<Executed<FileRecord>> {
  const original = await ctx.ports.originals.original(path);
  if (!original) return { did: "failed", detail: `${path}: no original is held to give back`, record: null };
  const { root, rootless } = ctx.ports;
  const { uid, gid, mode } = original.meta;
  const owner = rootless ? {} : { uid, gid };
  await writeFileAt(root, path, original.bytes, { mode, ...owner });
  const back = await readFound(root, path, true);
  if (typeof back !== "object" || back === null || back.sha !== original.sha)
    return { did: "failed", detail: `${path} read back differently from its original`, record: null };
  await ctx.ports.originals.release(path);
  return { did: "restored", detail: step.detail, record: null };
}
