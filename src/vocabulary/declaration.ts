// The declaration: the whole of what the mesh wants on one node, refused on arrival if malformed.
import { createHash } from "node:crypto";
import * as z from "zod";
import { printable } from "../printable.ts";
import { containerCrossChecks } from "./container-checks.ts";
import { parseJsonBytes } from "./json.ts";
import type { UniqueKey } from "./kind.ts";
import { nameProblem } from "./names.ts";
import type { Parsed, Refusal } from "./refusal.ts";
import { refusalsFromIssues } from "./refusal.ts";
import { ReleaseVersion } from "./release.ts";
import {
  factsOf,
  isResourceType,
  KINDS,
  madeOf,
  Name,
  NodeName,
  PENDING_TYPES,
  pathsOf,
  type Resource,
  refsOf,
  secretsOf,
  uniqueKeysOf,
} from "./resources.ts";

export const Mode = z.enum(["adopted", "converged"]);
export type Mode = z.infer<typeof Mode>;

/** A sealed value: `v1:<ephemeral pub>:<nonce>:<ciphertext‖tag>`, each standard base64. */
export const Sealed = z
  .string()
  .regex(/^v1:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/, "must be a sealed value (v1:…)");

/**
 * In a bundle, in a sealed value's place: a secret the installer gives genesis (`--secret NAME=FILE`). The first
 * machine has no mesh to seal anything to it yet; a declaration from the mesh carries its secrets sealed.
 */
export const INSTALLER_SECRET = "installer";

const SecretValue = z
  .string()
  .refine(
    (v) => v === INSTALLER_SECRET || Sealed.safeParse(v).success,
    `must be a sealed value (v1:…) or "${INSTALLER_SECRET}"`,
  );

/**
 * The signed order (protocol.md): the mesh raises `serial` for every declaration to a node. Optional here, since
 * a file given to apply/plan/genesis is not signed and not judged by it; what arrives over the link must carry it.
 */
export const Serial = z.number().int().min(1);

/** When the mesh signed it: RFC 3339 in UTC (`Z`). Recorded, never a reason to refuse: there is no expiry. */
export const IssuedAt = z.iso.datetime({ message: "must be an RFC 3339 UTC time (2026-01-05T10:00:00Z)" });

/**
 * Whom the mesh addressed (protocol.md, "Addressed"): the node's Ed25519 identity public key, standard base64 of
 * its raw 32 bytes. A name outlives its enrolments (`node rm` then `node add`), a key does not: what was signed
 * for a name's earlier life names an earlier key. Optional here, as `serial` is; required over the link.
 */
export const AddressedTo = z
  .string()
  .regex(/^[A-Za-z0-9+/]{43}=$/, "must be an identity public key (standard base64 of 32 bytes)");

export const DeclarationHead = z.strictObject({
  v: z.literal(1),
  node: NodeName,
  to: AddressedTo.optional(),
  serial: Serial.optional(),
  issued_at: IssuedAt.optional(),
  mode: Mode,
  owns_nothing: z.boolean().optional(),
  resources: z.array(z.unknown()),
  secrets: z.record(Name, SecretValue).optional(),
  membership: Sealed.optional(),
  /** What the host itself runs: the release of mesh-host the mesh names (protocol.md "Releases"). */
  host: z.strictObject({ release: ReleaseVersion }).optional(),
});

export type Declaration = Omit<z.infer<typeof DeclarationHead>, "resources"> & { resources: Resource[] };

/** What a host says of the types it implements, so the vocabulary can refuse on arrival without knowing hosts. */
export interface TypeSupport {
  supports(type: string): boolean;
  /** Why a type the vocabulary knows is refused here ("not on an Android host"). */
  reason: string;
}

export const ALL_TYPES: TypeSupport = { supports: () => true, reason: "" };

/** Parse and check a declaration body (already JSON-decoded); every refusal names the resource and the field. */
export function parseDeclaration(value: unknown, support: TypeSupport = ALL_TYPES): Parsed<Declaration> {
  const head = DeclarationHead.safeParse(value);
  if (!head.success)
    return { ok: false, refusals: refusalsFromIssues("declaration", head.error.issues, [], DeclarationHead) };
  const refusals: Refusal[] = [];
  const resources: Resource[] = [];
  head.data.resources.forEach((raw, index) => {
    const parsed = parseResource(raw, index, support);
    if (parsed.ok) resources.push(parsed.value);
    else refusals.push(...parsed.refusals);
  });
  refusals.push(...crossChecks(head.data, resources));
  if (refusals.length) return { ok: false, refusals };
  return { ok: true, value: { ...head.data, resources } };
}

/** The declaration from its body text or bytes: size, encoding, depth, JSON, then schema. */
export function parseDeclarationBody(
  body: string | Uint8Array,
  support: TypeSupport = ALL_TYPES,
): Parsed<Declaration> {
  const json = parseJsonBytes(body);
  if (!json.ok)
    return { ok: false, refusals: [{ id: "declaration", field: "", reason: `the body ${json.reason}` }] };
  return parseDeclaration(json.value, support);
}

export function digestOf(body: string | Uint8Array): string {
  return createHash("sha256").update(body).digest("hex");
}

function parseResource(raw: unknown, index: number, support: TypeSupport): Parsed<Resource> {
  const label = `resources[${index}]`;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    return { ok: false, refusals: [{ id: label, field: "", reason: "must be an object" }] };
  const { id, type } = raw as { id?: unknown; type?: unknown };
  // the id names a refusal only when it is a name: anything else may carry a line break, or be of any length
  const name = nameProblem(id) === null ? (id as string) : label;
  if (typeof type !== "string")
    return { ok: false, refusals: [{ id: name, field: "type", reason: "is required" }] };
  if (!isResourceType(type)) {
    const pending = (PENDING_TYPES as readonly string[]).includes(type);
    const reason =
      pending && support.supports(type)
        ? `type ${quoted(type)} is not supported by this version of mesh-host`
        : undefined;
    return {
      ok: false,
      refusals: [{ id: name, field: "type", reason: reason ?? unsupported(type, pending, support) }],
    };
  }
  if (!support.supports(type))
    return {
      ok: false,
      refusals: [{ id: name, field: "type", reason: `type ${quoted(type)}: ${support.reason}` }],
    };
  const schema = KINDS[type].schema;
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    return { ok: false, refusals: refusalsFromIssues(name, parsed.error.issues, [], schema) };
  return { ok: true, value: parsed.data as Resource };
}

/** A type from the input, quoted for a refusal: escaped and cut short. */
function quoted(type: string): string {
  return `"${printable(type, 40)}"`;
}

function unsupported(type: string, pending: boolean, support: TypeSupport): string {
  return pending ? `type ${quoted(type)}: ${support.reason}` : `unknown type ${quoted(type)}`;
}

/**
 * What no single resource can know, from each kind's facts: unique ids and keys (paths, names, interfaces),
 * references to ids that exist, secrets the declaration carries, emptiness meant.
 */
function crossChecks(head: z.infer<typeof DeclarationHead>, resources: Resource[]): Refusal[] {
  const refusals: Refusal[] = [];
  if (head.resources.length === 0 && !head.owns_nothing)
    refusals.push({
      id: "declaration",
      field: "resources",
      reason: "is empty; set owns_nothing: true if the node is meant to drop everything the mesh owned",
    });
  if (head.resources.length > 0 && head.owns_nothing)
    refusals.push({ id: "declaration", field: "owns_nothing", reason: "is true but resources are declared" });
  const ids = new Set<string>();
  for (const r of resources) {
    if (ids.has(r.id)) refusals.push({ id: r.id, field: "id", reason: "is declared more than once" });
    ids.add(r.id);
  }
  refusals.push(...keyClashes(resources));
  refusals.push(...underFiles(resources));
  refusals.push(...containerCrossChecks(resources, madeBy(resources)));
  for (const r of resources) {
    for (const { field, name } of refsOf(r))
      if (!ids.has(name))
        refusals.push({ id: r.id, field, reason: `names "${name}", which is not declared` });
    for (const { field, name } of secretsOf(r))
      if (!head.secrets?.[name])
        refusals.push({
          id: r.id,
          field,
          reason: `names secret "${name}", which the declaration does not carry`,
        });
  }
  return refusals;
}

/** Each path a resource makes (its kind's `madeOf`), to the id that makes it. */
function madeBy(resources: Resource[]): Map<string, string> {
  return new Map(resources.flatMap((r) => madeOf(r).map((path) => [path, r.id] as const)));
}

/**
 * Two resources giving one key in one space (each kind's `uniqueKeysOf`): a key one of them owns refuses the
 * other, wherever either is declared; otherwise the later is refused, naming the earlier.
 */
function keyClashes(resources: Resource[]): Refusal[] {
  const refusals: Refusal[] = [];
  const holders = new Map<string, { id: string; key: UniqueKey }>();
  for (const r of resources)
    for (const key of uniqueKeysOf(r)) {
      const at = `${key.space}\0${key.key}`;
      const held = holders.get(at);
      if (!held) holders.set(at, { id: r.id, key });
      else if (held.id === r.id) continue;
      else if (held.key.owns && !key.owns)
        refusals.push({ id: r.id, field: key.field, reason: held.key.owns(held.id) });
      else if (key.owns && !held.key.owns) {
        refusals.push({ id: held.id, field: held.key.field, reason: key.owns(r.id) });
        holders.set(at, { id: r.id, key });
      } else if (key.clash) refusals.push({ id: r.id, field: key.field, reason: key.clash(held.id) });
    }
  return refusals;
}

/**
 * A file is never a directory of another declared path: `/x` a file and `/x/y` anything would plan both
 * `created` and then fail the second on the machine. Refused on arrival, naming both.
 */
function underFiles(resources: Resource[]): Refusal[] {
  const files = new Map<string, string>();
  for (const r of resources)
    if (factsOf(r.type).pathIsFile) for (const path of pathsOf(r)) files.set(path, r.id);
  const refusals: Refusal[] = [];
  for (const r of resources)
    for (const path of pathsOf(r)) {
      const under = fileAbove(path, files);
      if (under)
        refusals.push({
          id: r.id,
          field: "path",
          reason: `is under ${under.up}, which "${under.id}" declares a file`,
        });
    }
  return refusals;
}

/** The nearest path above `path` that a declared file holds, and its id. */
function fileAbove(path: string, files: ReadonlyMap<string, string>): { up: string; id: string } | undefined {
  for (let up = parentOf(path); up !== "/"; up = parentOf(up)) {
    const id = files.get(up);
    if (id !== undefined) return { up, id };
  }
  return undefined;
}

const parentOf = (path: string): string => path.slice(0, Math.max(1, path.lastIndexOf("/")));
