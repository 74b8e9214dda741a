// What every applier is: one decision (read only) shared by plan and apply, and one executor per step.

import * as z from "zod";
import type { OriginalMeta, Originals, OverlayState } from "../store/index.ts";
import type { Exec } from "../system/index.ts";
import type { Did, Resource } from "../vocabulary/index.ts";

export type { OriginalMeta, Originals } from "../store/index.ts";
export type { Exec, ExecOptions, ExecResult } from "../system/index.ts";

export interface Logger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface Ports {
  /** Every declared path is resolved under it. */
  root: string;
  exec: Exec;
  /** True when the host runs without root: owner and group are ignored, and the report says so. */
  rootless: boolean;
  log: Logger;
  originals: Originals;
  /** The overlay's files in the state directory (its key, journal, retirement ledger); none without one. */
  overlay?: OverlayState;
}

/** One step of a plan: plain data, keyed by `action`, carried out by the applier of `type`. */
export interface Step {
  id: string;
  type: string;
  /** What the step does (future tense in a plan, past in a report): the report's vocabulary. */
  did: Did;
  detail: string;
  /** The executor's key within its applier ("write", "mkdir", "run", "remove", "restore", "none"). */
  action: string;
  /** What the executor needs; never printed (it may carry unsealed bytes). */
  data?: unknown;
  /** For a refusal (`action: "refuse"`): the resource's field it is about ("schedule", "name"); "path" if absent. */
  field?: string;
}

export interface DecideContext {
  ports: Ports;
  /** Ids that changed (or, in a plan, will change) earlier in this apply: what `on` and `restart_on` look at. */
  changed: ReadonlySet<string>;
  /** Paths that earlier steps of this apply make: a plan sees them before the machine does. */
  made: ReadonlySet<string>;
  /** Every file and directory path the declaration names: what a purge keeps. */
  declaredPaths: ReadonlySet<string>;
  /** A named secret, unsealed; only a file applier asks, only to write it. */
  secret(name: string): Uint8Array;
  /**
   * The digest the host's records say it last wrote at `path`, as they stand when this resource is reached
   * (a plan feeds its own writes forward; an apply, what it has executed); undefined: no record of it.
   */
  wrote?(path: string): string | undefined;
  /**
   * The record of another id that names `path`: a path moving from one id to another is still the mesh's,
   * never "found" (its content would be held as an original and given back instead of removed).
   */
  claimed?(path: string, id: string): RecordOfAny | undefined;
  /** The declaration's mode: on an adopted node what the host found is held. */
  mode?: "adopted" | "converged";
  /** Every resource of the declaration, in order: what a runtime is asked about in one call. */
  declared?: readonly Resource[];
}

export interface Executed<Rec> {
  did: Did;
  detail: string;
  /** The record to keep for this id afterwards; null when the resource is gone and nothing is owed. */
  record: Rec | null;
}

/** A record kept in records.json for each id: what the host wrote and what it found. */
// a type, not an interface: one stands in the records file's loose map (store's Records) as it is
export type RecordBase = {
  type: string;
  /** Journalled before its step ran and not yet confirmed by it (an apply killed or interrupted first). */
  pending?: boolean;
};

/**
 * The record schema of the applier of `type`: its own fields beside the type and the journal's `pending`, any
 * other field kept as written (a newer field an older record lacks is optional in its shape, not refused here).
 */
export const recordOf = <T extends string, S extends z.core.$ZodLooseShape>(type: T, shape: S) =>
  z.looseObject({ type: z.literal(type), pending: z.boolean().optional(), ...shape });

/** A record as the records file keeps it, of whichever type: its applier's own fields, unread until checked. */
export type RecordOfAny = RecordBase & { readonly [field: string]: unknown };

/**
 * One member of an applier's steps: an `action` and the `data` its executor reads, together, so the executor is
 * handed its own data typed, never cast (balena-supervisor's CompositionStepArgs). An applier's steps are a
 * union of these, keyed by action.
 */
export type StepOf<A extends string, D = undefined> = Omit<Step, "action" | "data"> & { action: A } & ([
    D,
  ] extends [undefined]
    ? { data?: undefined }
    : { data: D });

/** The member of the union `S` whose action is `A` (any step, for an applier not yet typed by action). */
export type StepFor<S extends Step, A extends string> = string extends S["action"]
  ? S
  : S extends { action: infer X }
    ? A extends X
      ? S
      : never
    : never;

/** One executor per action of the union `S`: the compiler refuses a missing one, and each is given its own step. */
export type Executors<S extends Step, R, Rec> = {
  [A in S["action"]]: (
    step: StepFor<S, A>,
    wanted: R | undefined,
    record: Rec | undefined,
    ctx: DecideContext,
  ) => Promise<Executed<Rec>>;
};

/** On an adopted node, one the host already has, held as found: the record the hold keeps, and its line. */
export interface Found<Rec> {
  /** What was found, kept for the day a declaration takes it; none: the apply's own record of a hold. */
  record?: Rec;
  /** The report's words for the hold ("web.service held: found running on this adopted node (…)"). */
  detail: string;
}

/** A found original a step keeps before it runs: journalled, so a kill between the keep and the write loses nothing. */
export interface KeptOriginal {
  path: string;
  bytes: Uint8Array;
  meta: OriginalMeta;
  /** A secret is written over it: no digest of it is ever said. */
  secret: boolean;
}

/**
 * What the apply asks an applier about its resources, steps and records, so that src/apply/ names no resource
 * type: each applier says its own. An absent trait is false, none or nothing. Function properties, as
 * `decide` and `execute` are: their parameters are compared one way only, so an applier over its own types
 * never stands as another's; the host dispatches to it through its registration (dispatch.ts).
 */
export interface Traits<R extends Resource, Rec extends RecordBase, S extends Step> {
  /**
   * It looks at what changed before it (`on`, `restart_on`) or was written before it is reached: decided in
   * declaration order, and again when the apply reaches it, never side by side with its neighbours.
   */
  readsChanges?: (wanted: R) => boolean;
  /** Its failure stops the apply: what comes after may need its effect (an action's command). */
  stopsOnFailure?: boolean;
  /**
   * It writes one whole file at its declared path through a temporary beside it: its writes run side by side
   * with the next ones of its kind (their fsyncs overlap), and temporaries a crash left there are swept.
   */
  writesFiles?: boolean;
  /** The path at which what it writes is a secret: its original is kept as one and no digest of it is said. */
  secretAt?: (wanted: R) => string | undefined;
  /** Before a step runs: the record this id will have (journalled pending) and the found original to keep. */
  journal?: (step: S) => { intent?: Rec; original?: KeptOriginal };
  /** The path a record names: a path moving between ids is claimed, not found; a new path is a new resource. */
  pathOf?: (record: Rec) => string | undefined;
  /** The paths whose originals a record keeps, for the report's holds (its own path unless it says more). */
  originalsAt?: (record: Rec) => string[];
  /** The digest of what the record says the host last wrote at its path: what `DecideContext.wrote` reads. */
  wrote?: (record: Rec) => string | undefined;
  /**
   * Adopted mode's input, for a kind whose facts say it is held there (`adopted`) and a declaration that does
   * not take it: whether the host already has one at its place, as the hold to keep (`true`: held under the
   * apply's own record), or false. `held` is this id's record of an earlier hold of the same thing (`heldAs`,
   * `sameAs`): whether it is held still is the applier's to say. The apply holds it and gives it back as found
   * (apply/adopted.ts), one step for every kind; this applier decides only what it is handed when not held.
   */
  found?: (wanted: R, ctx: DecideContext, held?: Rec) => Promise<boolean | Found<Rec>>;
  /** Whether a record of its own is a hold's (found, never touched): what it holds (the unit, the package), or undefined. */
  heldAs?: (record: Rec) => string | undefined;
  /** What giving a held record back as found says, where more than that it is left as found (a package stays installed). */
  leftAs?: (record: Rec) => string;
  /**
   * Whether `record` names what `wanted` does (the same unit, package, process); another is given back first
   * when `wanted` is held (its own removal), as its decision does when it is not. Absent: always the same.
   */
  sameAs?: (record: Rec, wanted: R) => boolean;
  /** `--diff`: what a planned step will change, as lines; never a secret's content. */
  diff?: (step: S, wanted: R | undefined, root: string) => Promise<string[] | undefined>;
}

/** `S`: the applier's steps, a union keyed by action (StepOf), or any step while it is not typed yet. */
export interface Applier<
  R extends Resource = Resource,
  Rec extends RecordBase = RecordBase,
  S extends Step = Step,
> {
  type: R["type"];
  /**
   * What its records are: the apply parses each one from disk with it before any decision (a record it does
   * not parse makes the records file unreadable), so `decide`, `decideRemoval` and `execute` get only these.
   */
  recordSchema: z.ZodType<Rec>;
  /** Read only: the one step that makes the machine match `wanted`, given the record of earlier applies. */
  decide: (wanted: R, record: Rec | undefined, ctx: DecideContext) => Promise<S>;
  /** Read only: the one step that gives back an undeclared resource (remove what the mesh made, restore what it found). */
  decideRemoval: (id: string, record: Rec, ctx: DecideContext) => Promise<S>;
  /** Carry out a step this applier decided, read the machine back, and say what happened. */
  execute: (
    step: S,
    wanted: R | undefined,
    record: Rec | undefined,
    ctx: DecideContext,
  ) => Promise<Executed<Rec>>;
  /** What the apply asks about this type: declared here, never named in src/apply/. */
  traits?: Traits<R, Rec, S>;
}

/** The resource of type `T`. */
export type ResourceOf<T extends Resource["type"]> = Extract<Resource, { type: T }>;

/** The host's form of an applier of type `T`: every input checked to be its own before its typed code sees it. */
export interface Registered<T extends string = string> {
  readonly type: T;
  /** A record from disk as its applier reads it (its record schema's parse); undefined: not one it reads. */
  readonly check: (record: RecordOfAny) => RecordOfAny | undefined;
  readonly decide: (wanted: Resource, record: RecordBase | undefined, ctx: DecideContext) => Promise<Step>;
  readonly decideRemoval: (id: string, record: RecordBase, ctx: DecideContext) => Promise<Step>;
  readonly execute: (
    step: Step,
    wanted: Resource | undefined,
    record: RecordBase | undefined,
    ctx: DecideContext,
  ) => Promise<Executed<RecordBase>>;
  readonly traits: Traits<Resource, RecordBase, Step>;
}

/**
 * A host's list: its appliers, each registered (dispatch.ts `registered`) under the type it carries out, so
 * the compiler refuses one listed under another's type, and checks each against its own kind where it is
 * registered; the host dispatches by the same type (a resource's, a record's, a step's).
 */
export type ApplierList = { [T in Resource["type"]]?: Registered<T> };
