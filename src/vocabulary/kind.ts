// A kind: what the mesh knows of one resource type apart from any machine — its schema, and the facts about a
// resource of it that the declaration's cross-checks, `mesh push`, the plan and the adopted-mode hold read
// (mgmt's Res with its own Validate, registered by kind). An applier keeps only what touches the machine.
import type * as z from "zod";

/** A name a resource gives in one of its fields: another resource's id, or a secret of the declaration. */
export interface Named {
  /** The resource's field it is given in ("on", "restart_on", "secret"): what a refusal names. */
  field: string;
  name: string;
}

/**
 * A value a resource gives that no other resource of the declaration may give in the same space: a path, a
 * container's name, an overlay's interface. Two resources giving one are refused on arrival, naming both.
 */
export interface UniqueKey {
  /** Where it must be unique ("path", "container name", "interface"): keys of two spaces never meet. */
  space: string;
  key: string;
  /** The resource's field it is given in: what a refusal names. */
  field: string;
  /** The refusal of the later of two resources giving it, naming the earlier; none: this key refuses nothing. */
  clash?(earlier: string): string;
  /**
   * It is this resource's own: whichever other resource gives it is refused with these words naming the owner,
   * wherever either is declared (a file at the configuration an overlay writes).
   */
  owns?(owner: string): string;
}

/** The facts of a kind, over its resource `R`; an absent fact is none (no path, no secret, no reference). */
export interface KindFacts<R> {
  /**
   * The absolute paths a resource of this kind owns on the machine: no two resources may declare one (they are
   * its unique keys in the space "path"), and a purge keeps them.
   */
  pathsOf?(r: R): string[];
  /**
   * What it makes that a resource after it may rely on: the paths that exist once it is applied (the plan's
   * `made`, and what a container or an image declared after it may read).
   */
  madeOf?(r: R): string[];
  /** Its values no other resource may give in the same space, beside its paths (`pathsOf`). */
  uniqueKeysOf?(r: R): UniqueKey[];
  /** What it writes at its paths is one plain file: nothing may be declared under them. */
  pathIsFile?: boolean;
  /** The declaration's secrets it reads: each must be carried, and only these may be pushed with `--secret`. */
  secretsOf?(r: R): Named[];
  /** The ids of other resources it names: each must be declared. */
  refsOf?(r: R): Named[];
  /**
   * Adopted mode: what the host already has at its place is the host's, held as found, until a declaration
   * says `takes: true`; a held one undeclared is given back as it was found. The applier says how one is found.
   */
  adopted?: { takes(r: R): boolean };
}

/** One resource type: its name, its schema (what a declaration may say of it), and its facts. */
export interface Kind<T extends string = string, S extends z.ZodType = z.ZodType>
  extends KindFacts<z.infer<S>> {
  type: T;
  schema: S;
}

/** A kind, its facts checked against its own schema's type by the compiler. */
export function kind<T extends string, S extends z.ZodType>(
  type: T,
  schema: S,
  facts: KindFacts<z.infer<S>> = {},
): Kind<T, S> {
  return { type, schema, ...facts };
}
