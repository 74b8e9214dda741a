// package: installed by pacman, read back with `pacman -Q`; undeclared, removed only if the mesh installed it.

import * as z from "zod";
import {
  errorLines,
  type Installed,
  PACMAN_CHANGE_TIMEOUT_MS,
  pacman,
  pacmanError,
  queryPackage,
  syncTarget,
  versionMatches,
} from "../../system/arch/index.ts";
import type { PackageResource } from "../../vocabulary/index.ts";
import { packageNameProblem } from "../../vocabulary/index.ts";
import { executeBy, failedKeeping, failsAgain, forgets, recorded, stepsOf } from "../step.ts";
import {
  type Applier,
  type DecideContext,
  type Executed,
  type Executors,
  type Found,
  recordOf,
  type StepOf,
} from "../types.ts";

export const PackageRecord = recordOf("package", {
  name: z.string(),
  /** Whether the package was installed when the host first touched it (and at which version): kept, never overwritten. */
  found: z.looseObject({ installed: z.boolean(), version: z.string().optional() }),
  /** The version last declared, if any. */
  version: z.string().optional(),
  /** Found installed at another version on an adopted node and held: the mesh has installed nothing of it. */
  held: z.literal(true).optional(),
});
export type PackageRecord = z.infer<typeof PackageRecord>;

interface InstallData {
  /** What an apply may journal before executing: what was found, kept even if the host dies mid-install. */
  intent: PackageRecord;
  name: string;
  target: string;
  version?: string;
  record: PackageRecord;
  /** The package this id named before, given back first when a declaration names another. */
  previous?: PackageRecord;
}

/** The package applier's steps, keyed by action: each executor below is handed its own. */
export type PackageStep =
  | StepOf<"record", { name: string; record: PackageRecord }>
  | StepOf<"install", InstallData>
  | StepOf<"remove", { name: string }>
  | StepOf<"forget" | "fail" | "refuse">;

const step = stepsOf<PackageStep>("package");

const foundOf = (now: Installed | null): PackageRecord["found"] =>
  now ? { installed: true, version: now.version } : { installed: false };

/**
 * Adopted mode's input: a package the mesh has installed nothing of (no record, or a hold's) and finds installed
 * is the host's, held (apply/adopted.ts) until a declaration takes it. Found at another version than declared,
 * nothing is installed; found as declared, it stays the host's all the same, so a later version is held like
 * one found at first. What was found the first time is kept, so a take reads as an update.
 */
async function foundInstalled(
  wanted: PackageResource,
  ctx: DecideContext,
  held: PackageRecord | undefined,
): Promise<Found<PackageRecord> | false> {
  const { name, version } = wanted;
  const now = await queryPackage(ctx.ports.exec, name);
  if (typeof now === "string" || now === null) return false;
  const found = held?.found ?? foundOf(now);
  if (version && !versionMatches(now.version, version))
    return {
      record: { type: "package", name, found, held: true },
      detail: `${name} ${now.version} held: found installed on this adopted node (takes: true installs ${version})`,
    };
  return {
    record: { type: "package", name, found, ...(version ? { version } : {}), held: true },
    detail: `${name} ${now.version} is installed (found installed: it stays when undeclared)`,
  };
}

/** What giving back a package the mesh found installed says: it stays, whatever it was declared since. */
const leftInstalled = (record: PackageRecord): string =>
  `${record.name} left installed: it was found installed${record.found?.version ? ` (${record.found.version})` : ""}`;

/** One executor per action of PackageStep. */
const executors: Executors<PackageStep, PackageResource, PackageRecord> = {
  record: recorded,
  install: async (s, _wanted, record, ctx) => install(s, s.data, record, ctx),
  remove: async (s, _wanted, record, ctx) => {
    const gone = await remove(s.data.name, ctx);
    return gone ? failedKeeping(gone, record) : { did: "removed", detail: s.detail, record: null };
  },
  forget: forgets,
  fail: failsAgain,
  refuse: failsAgain,
};

export const packageApplier: Applier<PackageResource, PackageRecord, PackageStep> = {
  recordSchema: PackageRecord,
  type: "package",
  traits: {
    found: foundInstalled,
    heldAs: (record) => (record.held ? record.name : undefined),
    leftAs: leftInstalled,
    sameAs: (record, wanted) => record.name === wanted.name,
  },

  async decide(wanted, record, ctx) {
    const { id, name, version } = wanted;
    const problem = packageNameProblem(name);
    if (problem) return step(id, "failed", "refuse", `name ${problem}`, undefined, "name");
    const now = await queryPackage(ctx.ports.exec, name);
    if (typeof now === "string") return step(id, "failed", "fail", now);
    const previous = record && record.name !== name ? record : undefined;
    const kept = previous ? undefined : record;
    const next: PackageRecord = {
      type: "package",
      name,
      found: kept?.found ?? foundOf(now),
      ...(version ? { version } : {}),
    };
    // a held package taken now is touched for the first time
    const first = kept && !kept.held ? "" : now ? " (found installed: it stays when undeclared)" : "";
    if (now && (!version || versionMatches(now.version, version)) && !previous)
      return step(id, "unchanged", "record", `${name} ${now.version} is installed${first}`, {
        name,
        record: next,
      });
    const target = syncTarget(name, version);
    const data: InstallData = { intent: next, name, target, version, record: next, previous };
    const giveBack = previous ? `${previous.name} given back, then ` : "";
    if (!now) {
      const did = kept
        ? kept.version === version
          ? "repaired"
          : "updated"
        : previous
          ? "updated"
          : "created";
      return step(id, did, "install", `${giveBack}install ${target}`, data);
    }
    const did = kept?.version === version ? "repaired" : "updated";
    return step(
      id,
      did,
      "install",
      `${giveBack}${name} ${now.version} installed; install ${target}${first}`,
      data,
    );
  },

  async decideRemoval(id, record, ctx) {
    const problem = packageNameProblem(record.name);
    if (problem)
      return step(
        id,
        "failed",
        "refuse",
        `the record names package "${record.name}", which ${problem}; nothing was removed`,
        undefined,
        "name",
      );
    if (record.found?.installed !== false) return step(id, "unchanged", "forget", leftInstalled(record));
    const now = await queryPackage(ctx.ports.exec, record.name);
    if (typeof now === "string") return step(id, "failed", "fail", now);
    // what the report says is what was done: a package the mesh's install never got in (or removed by hand) is
    // not removed now, only forgotten
    if (!now)
      return step(
        id,
        "unchanged",
        "forget",
        `${record.name} is not installed (its install did not complete, or it was removed since): nothing was removed`,
      );
    return step(id, "removed", "remove", `${record.name} ${now.version} removed (the mesh installed it)`, {
      name: record.name,
    });
  },

  execute: executeBy(executors),
};

/** `pacman -R` of a package the mesh installed, read back absent; null when it is gone, else pacman's words. */
async function remove(name: string, ctx: DecideContext): Promise<string | null> {
  const r = await pacman(ctx.ports.exec, ["-R", "--noconfirm", "--", name], PACMAN_CHANGE_TIMEOUT_MS);
  if (r.code !== 0) return `pacman -R ${name}: ${pacmanError(r)}`;
  const back = await queryPackage(ctx.ports.exec, name);
  if (back === null) return null;
  return typeof back === "string" ? back : `${name} ${back.version} is still installed after pacman -R`;
}

/** The package this id named before, removed first if the mesh installed it: the failure of that, or null. */
async function givePrevious(
  previous: PackageRecord | undefined,
  old: PackageRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<PackageRecord> | null> {
  if (previous?.found.installed !== false) return null;
  const why = await remove(previous.name, ctx);
  return why ? failedKeeping(`giving back ${previous.name} failed: ${why}`, old) : null;
}

/** `pacman -S` the target and read it back with `pacman -Q`; the record (what was found) is kept whatever happens. */
async function install(
  s: PackageStep,
  data: InstallData,
  old: PackageRecord | undefined,
  ctx: DecideContext,
): Promise<Executed<PackageRecord>> {
  const { exec } = ctx.ports;
  const { name, target, version, record } = data;
  const gone = await givePrevious(data.previous, old, ctx);
  if (gone) return gone;
  const r = await pacman(exec, ["-S", "--noconfirm", "--needed", "--", target], PACMAN_CHANGE_TIMEOUT_MS);
  if (r.code !== 0) return { did: "failed", detail: `pacman -S ${target}: ${pacmanError(r)}`, record };
  const back = await queryPackage(exec, name);
  if (typeof back === "string") return { did: "failed", detail: back, record };
  if (!back)
    return { did: "failed", detail: `read back: ${name} is not installed after pacman -S ${target}`, record };
  if (version && !versionMatches(back.version, version))
    return {
      did: "failed",
      detail: `read back: ${name} ${back.version} is installed, declared ${version}`,
      record,
    };
  // pacman exits 0 when an install scriptlet fails: its error lines still say so
  const errors = errorLines(r);
  if (errors.length)
    return { did: "failed", detail: `pacman -S ${target} exited 0 but said: ${errors.join("; ")}`, record };
  return { did: s.did, detail: `${s.detail}; read back ${name} ${back.version}`, record };
}
