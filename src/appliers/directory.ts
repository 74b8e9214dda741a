// directory: created with its parents, read back by stat; removed only when the mesh made it and it is empty.

import { chmod, chown, lstat, mkdir, readdir, rm, rmdir } from "node:fs/promises";
import type { DirectoryResource } from "../vocabulary/index.ts";
import { octal, ownerIgnored, parseMode, placeProblem, resolveIds, underRoot } from "./paths.ts";
import { stepsOf } from "./step.ts";
import type { Applier, DecideContext, Executed, RecordBase, Step } from "./types.ts";

export interface DirectoryRecord extends RecordBase {
  type: "directory";
  path: string;
  created: boolean;
  /** The mode it had when the mesh first found it, to give back on undeclare. */
  found_mode?: string;
  mode?: string;
}

interface DirData {
  mode?: number;
  uid?: number;
  gid?: number;
  create: boolean;
  purge: string[];
  /** The record this id will have once made: journalled before anything is touched. */
  intent: DirectoryRecord;
}

async function statDir(abs: string): Promise<{ mode: number; uid: number; gid: number } | null | string> {
  try {
    const st = await lstat(abs);
    if (st.isSymbolicLink()) return "is a symbolic link; it is not followed";
    if (!st.isDirectory()) return "exists and is not a directory";
    return { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    return `cannot be read: ${(e as NodeJS.ErrnoException).code}`;
  }
}

/** Entries under `path` that nothing declared names, neither as a path nor as an ancestor of one. */
async function unmanagedEntries(path: string, abs: string, declared: ReadonlySet<string>): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(abs);
  } catch {
    return [];
  }
  const keep = (p: string) => declared.has(p) || [...declared].some((d) => d.startsWith(`${p}/`));
  return names.map((n) => `${path}/${n}`).filter((p) => !keep(p));
}

const step = stepsOf("directory");

const refuse = (id: string, detail: string): Step => step(id, "failed", "refuse", detail);

export const directoryApplier: Applier<DirectoryResource, DirectoryRecord> = {
  type: "directory",

  async decide(wanted, record, ctx) {
    const { root, rootless } = ctx.ports;
    const problem = placeProblem(root, wanted.path);
    if (problem) return refuse(wanted.id, problem);
    const abs = underRoot(root, wanted.path);
    const found = await statDir(abs);
    if (typeof found === "string") return refuse(wanted.id, `${wanted.path} ${found}`);
    const ids = rootless ? {} : resolveIds(root, wanted.owner, wanted.group);
    const ignored = ownerIgnored(rootless, wanted);
    if (typeof ids === "string") return refuse(wanted.id, ids);
    const mode = parseMode(wanted.mode);
    const purge = wanted.purge ? await unmanagedEntries(wanted.path, abs, ctx.declaredPaths) : [];
    // a path another id recorded is the mesh's already: never taken as found
    const prior = record ?? (ctx.claimed?.(wanted.path, wanted.id) as DirectoryRecord | undefined);
    const intent: DirectoryRecord = {
      type: "directory",
      path: wanted.path,
      created: prior ? prior.created : found === null,
      mode: wanted.mode,
      found_mode: prior ? prior.found_mode : found ? octal(found.mode) : undefined,
    };
    const data: DirData = { mode, ...ids, create: found === null, purge, intent };
    if (found === null) {
      const did = record?.created ? "repaired" : "created";
      return step(wanted.id, did, "make", `${wanted.path} ${did}${ignored}`, data);
    }
    const wrong = [
      mode !== undefined && mode !== found.mode ? `mode ${octal(found.mode)} → ${octal(mode)}` : "",
      ids.uid !== undefined && ids.uid !== found.uid ? `owner ${found.uid} → ${ids.uid}` : "",
      ids.gid !== undefined && ids.gid !== found.gid ? `group ${found.gid} → ${ids.gid}` : "",
      purge.length ? `purge ${purge.length} unmanaged entr${purge.length === 1 ? "y" : "ies"}` : "",
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
    if (problem) return refuse(id, problem);
    if (ctx.declaredPaths.has(record.path))
      return step(id, "unchanged", "forget", `${record.path} is now declared by another resource`);
    const found = await statDir(underRoot(ctx.ports.root, record.path));
    if (found === null) return step(id, "removed", "forget", `${record.path} was already gone`);
    if (typeof found === "string")
      return step(id, "unchanged", "forget", `${record.path} left in place: it ${found}`);
    if (record.created) return step(id, "removed", "remove", `${record.path} removed (the mesh created it)`);
    const back = parseMode(record.found_mode);
    if (back !== undefined && back !== found.mode)
      return step(id, "restored", "restore", `${record.path} given back mode ${record.found_mode}`, back);
    return step(id, "unchanged", "forget", `${record.path} left as it was found`);
  },

  async execute(step, wanted, record, ctx): Promise<Executed<DirectoryRecord>> {
    const path = wanted?.path ?? record?.path ?? "";
    const abs = underRoot(ctx.ports.root, path);
    switch (step.action) {
      case "make":
      case "adopt":
        return makeAndReadBack(step, wanted!, abs, ctx);
      case "none":
        return { did: step.did, detail: step.detail, record: record ?? null };
      case "remove":
        try {
          await rmdir(abs);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOTEMPTY") throw e;
          return {
            did: "unchanged",
            detail: `${path} left in place: it holds what the mesh did not create`,
            record: null,
          };
        }
        return { did: "removed", detail: step.detail, record: null };
      case "restore":
        await chmod(abs, step.data as number);
        return { did: "restored", detail: step.detail, record: null };
      case "forget":
        return { did: step.did, detail: step.detail, record: null };
      default:
        return { did: "failed", detail: step.detail, record: record ?? null };
    }
  },
};

async function makeAndReadBack(
  step: Step,
  wanted: DirectoryResource,
  abs: string,
  ctx: DecideContext,
): Promise<Executed<DirectoryRecord>> {
  const data = step.data as DirData;
  if (data.create) await mkdir(abs, { recursive: true, mode: data.mode ?? 0o755 });
  if (data.mode !== undefined) await chmod(abs, data.mode);
  if (data.uid !== undefined || data.gid !== undefined) await chown(abs, data.uid ?? -1, data.gid ?? -1);
  for (const entry of data.purge) {
    // rm does not follow links: a link is removed, never what it points at
    if (!placeProblem(ctx.ports.root, entry))
      await rm(underRoot(ctx.ports.root, entry), { recursive: true, force: true });
  }
  const next: DirectoryRecord = data.intent;
  const back = await statDir(abs);
  if (typeof back !== "object" || back === null || (data.mode !== undefined && back.mode !== data.mode))
    return { did: "failed", detail: `${wanted.path} read back differently from what was made`, record: next };
  const purged = data.purge.length ? `; purged ${data.purge.join(", ")}` : "";
  return { did: step.did, detail: `${step.detail}${purged}; read back ${octal(back.mode)}`, record: next };
}
