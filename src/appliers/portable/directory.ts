// directory: created with its parents, read back by stat; removed only when the mesh made it and it is empty.

import { closeSync } from "node:fs";
import { basename } from "node:path";
import * as z from "zod";
import { DEFAULT_DIR_MODE, PLAN_NAMES_MAX } from "../../defaults.ts";
import {
  chmodDirAt,
  entryAt,
  forgetUnder,
  idsField,
  listAt,
  octal,
  openDirAt,
  ownerIgnored,
  parseMode,
  placeProblem,
  placeRefuses,
  removeDirAt,
  removeEntryIn,
  resolveIds,
  setOnHandle,
} from "../../system/index.ts";
import type { DirectoryResource } from "../../vocabulary/index.ts";
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
import {
  keptParents,
  madeParents,
  makingWords,
  missingParents,
  parentMaker,
  removeParents,
  removingWords,
} from "./parents.ts";

export const DirectoryRecord = recordOf("directory", {
  path: z.string(),
  created: z.boolean(),
  /** The mode it had when the mesh first found it, to give back on undeclare. */
  found_mode: z.string().optional(),
  mode: z.string().optional(),
  /** The parent directories the host made for it (absent before): removed with it when empty. */
  parents: z.array(z.string()).optional(),
});
export type DirectoryRecord = z.infer<typeof DirectoryRecord>;

interface DirData {
  mode?: number;
  uid?: number;
  gid?: number;
  create: boolean;
  purge: string[];
  /** The record this id will have once made: journalled before anything is touched. */
  intent: DirectoryRecord;
}

/** The directory at declared `path`: its mode and owner, null when absent, or why it cannot be managed. */
function statDir(root: string, path: string, fresh = false) {
  const e = entryAt(root, path, fresh);
  if (e === null || typeof e === "string") return e;
  if (e.kind === "link") return `${path} is a symbolic link; it is not followed`;
  if (e.kind !== "directory") return `${path} exists and is not a directory`;
  return { mode: e.mode, uid: e.uid, gid: e.gid };
}

/** Entries under `path` that nothing declared names, neither as a path nor as an ancestor of one. */
function unmanagedEntries(root: string, path: string, declared: ReadonlySet<string>): string[] {
  const keep = (p: string) => declared.has(p) || [...declared].some((d) => d.startsWith(`${p}/`));
  return listAt(root, path)
    .map((n) => `${path}/${n}`)
    .filter((p) => !keep(p));
}

/** What a purge removes, by name (the plan said only how many): the first few, then how many more. */
function purgeWords(purge: string[]): string {
  const named = purge.slice(0, PLAN_NAMES_MAX).join(", ");
  const more = purge.length - PLAN_NAMES_MAX;
  return more > 0 ? `${named} and ${more} more` : named;
}

/** The directory applier's steps, keyed by action (`restore` carries the mode found): each executor gets its own. */
export type DirectoryStep =
  | StepOf<"make" | "adopt" | "none", DirData>
  | StepOf<"restore", number>
  | StepOf<"remove" | "forget" | "fail" | "refuse">;

const step = stepsOf<DirectoryStep>("directory");

/** What is in the way at `path` fails this step alone (never followed); a path no host may act on refuses. */
const blocked = (id: string, path: string, detail: string) =>
  step(id, "failed", placeRefuses(path) ? "refuse" : "fail", detail);

const pathOf = (wanted: DirectoryResource | undefined, record: DirectoryRecord | undefined): string =>
  wanted?.path ?? record?.path ?? "";

/** One executor per action of DirectoryStep. */
const executors: Executors<DirectoryStep, DirectoryResource, DirectoryRecord> = {
  make: async (step, _wanted, _record, ctx) => makeAndReadBack(step, ctx),
  adopt: async (step, _wanted, _record, ctx) => makeAndReadBack(step, ctx),
  none: keeps,
  remove: async (step, wanted, record, ctx) => {
    const path = pathOf(wanted, record);
    if (removeDirAt(ctx.ports.root, path) === "not-empty")
      return {
        did: "unchanged",
        detail: `${path} left in place: it holds what the mesh did not create`,
        record: null,
      };
    const detail = `${step.detail.split("; then ")[0]}${removeParents(record?.parents, ctx)}`;
    return { did: "removed", detail, record: null };
  },
  restore: async (step, wanted, record, ctx) => {
    chmodDirAt(ctx.ports.root, pathOf(wanted, record), step.data);
    return { did: "restored", detail: step.detail, record: null };
  },
  forget: forgets,
  fail: failsAgain,
  refuse: failsAgain,
};

export const directoryApplier: Applier<DirectoryResource, DirectoryRecord, DirectoryStep> = {
  recordSchema: DirectoryRecord,
  type: "directory",
  traits: {
    journal: ({ data }) => ({ intent: typeof data === "object" ? data.intent : undefined }),
    pathOf: (record) => record.path,
  },

  async decide(wanted, record, ctx) {
    const { root, rootless } = ctx.ports;
    const problem = placeProblem(root, wanted.path);
    if (problem) return blocked(wanted.id, wanted.path, problem);
    const found = statDir(root, wanted.path);
    if (typeof found === "string") return blocked(wanted.id, wanted.path, found);
    const ids = rootless ? {} : resolveIds(root, wanted.owner, wanted.group);
    const ignored = ownerIgnored(rootless, wanted);
    // the field that did not resolve is blamed, never `path`
    if (typeof ids === "string") return step(wanted.id, "failed", "refuse", ids, undefined, idsField(ids));
    const mode = parseMode(wanted.mode);
    const purge = wanted.purge ? unmanagedEntries(root, wanted.path, ctx.declaredPaths) : [];
    // a path another id recorded is the mesh's already: never taken as found
    const prior: Claim | undefined = record ?? claimOf(ctx, wanted.path, wanted.id);
    const made = found === null ? madeParents(ctx, missingParents(root, wanted.path)) : [];
    const intent: DirectoryRecord = {
      type: "directory",
      path: wanted.path,
      created: prior ? prior.created : found === null,
      mode: wanted.mode,
      found_mode: prior ? prior.found_mode : found ? octal(found.mode) : undefined,
      parents: keptParents(record?.parents, made),
    };
    const data: DirData = { mode, ...ids, create: found === null, purge, intent };
    if (found === null) {
      const did = record?.created ? "repaired" : "created";
      const making = makingWords(ctx, wanted.id, made);
      return step(wanted.id, did, "make", `${wanted.path} ${did}${making}${ignored}`, data);
    }
    const wrong = [
      mode !== undefined && mode !== found.mode ? `mode ${octal(found.mode)} → ${octal(mode)}` : "",
      ids.uid !== undefined && ids.uid !== found.uid ? `owner ${found.uid} → ${ids.uid}` : "",
      ids.gid !== undefined && ids.gid !== found.gid ? `group ${found.gid} → ${ids.gid}` : "",
      purge.length ? `purge ${purgeWords(purge)}` : "",
    ].filter(Boolean);
    if (!wrong.length)
      return step(
        wanted.id,
        "unchanged",
        record ? "none" : "adopt",
        `${wanted.path} is as declared${ignored}`,
        data,
      );
    const did = record && record.mode === wanted.mode && !purge.length ? "repaired" : "updated";
    return step(wanted.id, did, "make", `${wanted.path}: ${wrong.join(", ")}${ignored}`, data);
  },

  async decideRemoval(id, record, ctx) {
    const problem = placeProblem(ctx.ports.root, record.path);
    if (problem) return blocked(id, record.path, problem);
    if (ctx.declaredPaths.has(record.path))
      return step(id, "unchanged", "forget", `${record.path} is now declared by another resource`);
    const found = statDir(ctx.ports.root, record.path);
    if (found === null)
      return step(id, "unchanged", "forget", `${record.path} was already gone: nothing was removed`);
    if (typeof found === "string")
      return step(id, "unchanged", "forget", `${record.path} left in place: ${found}`);
    if (record.created)
      return step(
        id,
        "removed",
        "remove",
        `${record.path} removed (the mesh created it)${removingWords(record.parents, ctx)}`,
      );
    const back = parseMode(record.found_mode);
    if (back !== undefined && back !== found.mode)
      return step(id, "restored", "restore", `${record.path} given back mode ${record.found_mode}`, back);
    return step(id, "unchanged", "forget", `${record.path} left as it was found`);
  },

  execute: executeBy(executors),
};

async function makeAndReadBack(
  step: StepOf<"make" | "adopt" | "none", DirData>,
  ctx: DecideContext,
): Promise<Executed<DirectoryRecord>> {
  const { data } = step;
  // the declared path travels in the step, as the record it will have
  const wanted = { path: data.intent.path };
  const { root } = ctx.ports;
  // walked afresh and held as a handle: the chmod, chown and purge land on the directory the walk reached,
  // and a link swapped in anywhere on the path since the plan is refused, never followed
  // the directory itself as declared (0755 when no mode is), whatever the umask; its parents as they are made
  const parents = parentMaker(ctx);
  const made = (p: string) => (p === wanted.path ? { mode: data.mode ?? DEFAULT_DIR_MODE } : parents(p));
  const fd = openDirAt(root, wanted.path, data.create ? made : undefined);
  try {
    setOnHandle(fd, wanted.path, data);
    // a link among the entries is removed itself, never what it points at
    for (const entry of data.purge) removeEntryIn(fd, basename(entry));
  } finally {
    closeSync(fd);
  }
  if (data.purge.length) forgetUnder(root, wanted.path);
  const next: DirectoryRecord = data.intent;
  const back = statDir(root, wanted.path, true);
  if (typeof back !== "object" || back === null || (data.mode !== undefined && back.mode !== data.mode))
    return { did: "failed", detail: `${wanted.path} read back differently from what was made`, record: next };
  const purged = data.purge.length ? `; purged ${data.purge.join(", ")}` : "";
  return { did: step.did, detail: `${step.detail}${purged}; read back ${octal(back.mode)}`, record: next };
}
