// Every resource type as a zod schema; the TypeScript types are inferred from them, never written twice.
// Every schema here, in containers.ts and in overlay.ts is built on its first use (`z.lazy`): a declaration of
// files never builds the container or overlay schemas, and `version` builds none (issue 22: start-up).
import * as z from "zod";
import { ACTION_MAX_TIMEOUT_S } from "../defaults.ts";
import { containerKeys, runtimeName } from "./container-checks.ts";
import { ContainerResource, ImageResource, NetworkResource, VolumeResource } from "./containers.ts";
import { type KindFacts, kind, type Named, type UniqueKey } from "./kind.ts";
import { AbsPath, checkedString, Name, pathProblem } from "./names.ts";

export { AbsPath, Name };

import { OverlayResource, overlayKeys } from "./overlay.ts";

export { containerCrossChecks } from "./container-checks.ts";
export {
  Address,
  ContainerResource,
  ImageRef,
  ImageResource,
  inSubnet,
  MESH_LABEL_PREFIX,
  NetworkResource,
  RUNTIME_NETWORKS,
  RuntimeKind,
  subnetProblem,
  VolumeResource,
} from "./containers.ts";
export { configPath, interfaceNameProblem, OverlayResource, WIREGUARD_DIR } from "./overlay.ts";

/**
 * A node's name meets the bus as one subject token (`mesh.declare.<n>`) and in a durable's name (`node-<n>`):
 * a dot would split the token and let node `a`'s inbox permission cover node `a.b`'s, so nodes take no dot.
 */
export const NodeName = z.lazy(() =>
  z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, "must match ^[a-z0-9][a-z0-9_-]{0,62}$ (a node name takes no dot)"),
);

export const OctalMode = z.lazy(() =>
  z
    .string()
    .regex(/^0?[0-7]{3,4}$/, 'must be an octal string such as "0644"')
    .refine((v) => Number.parseInt(v, 8) <= 0o7777, "must be at most 07777"),
);

/** A user or group: a name as useradd allows it, or a numeric id. */
export const Principal = z.lazy(() =>
  z.union([
    z
      .string()
      .regex(/^([a-z_][a-z0-9_-]{0,31}\$?|[0-9]{1,10})$/, "must be a user/group name or a numeric id"),
    z.number().int().min(0).max(4294967294),
  ]),
);

const base = { id: Name };

export const FileResource = z.lazy(() =>
  z
    .strictObject({
      ...base,
      type: z.literal("file"),
      path: AbsPath,
      content: z.string().optional(),
      content_b64: z.base64("must be standard base64").optional(),
      secret: Name.optional(),
      mode: OctalMode.optional(),
      owner: Principal.optional(),
      group: Principal.optional(),
    })
    .superRefine((r, ctx) => {
      const given = ["content", "content_b64", "secret"].filter((k) => r[k as keyof typeof r] !== undefined);
      if (given.length !== 1)
        ctx.addIssue({
          code: "custom",
          path: ["content"],
          message: given.length
            ? `give one of content, content_b64, secret, not ${given.join(" and ")}`
            : "give one of content, content_b64, secret",
        });
    }),
);

export const DirectoryResource = z.lazy(() =>
  z.strictObject({
    ...base,
    type: z.literal("directory"),
    path: AbsPath,
    mode: OctalMode.optional(),
    owner: Principal.optional(),
    group: Principal.optional(),
    purge: z.boolean().default(false),
  }),
);

export const ActionResource = z.lazy(() =>
  z.strictObject({
    ...base,
    type: z.literal("action"),
    run: z
      .array(z.string().refine((s) => !s.includes("\0"), "must not contain NUL"))
      .min(1, "must name a program")
      .superRefine((run, ctx) => {
        const why = "which runs whatever the host's working directory holds";
        const program = run[0] === undefined ? null : programPathProblem(run[0], why);
        if (program) ctx.addIssue({ code: "custom", path: [0], message: program });
      }),
    on: z.array(Name).optional(),
    creates: AbsPath.optional(),
    timeout_s: z.number().int().min(1).max(ACTION_MAX_TIMEOUT_S).optional(),
    env: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"),
        z.string(),
      )
      .optional(),
  }),
);

/** Unit types a `service` may name. */
const UNIT_SUFFIX = /\.(service|socket|timer|path|target)$/;

/**
 * systemd's own unit-name grammar (systemd.unit(5)): letters, digits and `:-_.\`, one `@` between a template's
 * prefix and an instance, shorter than 256 characters. It forms one path (/etc/systemd/system/<unit>) and can
 * hold no `/` and be no `.` or `..`, so it is safe there; every other name that forms a path keeps the one rule.
 */
const UNIT_NAME = /^[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]*)?\.[a-z]+$/;
const UNIT_NAME_MAX = 255;

/** Why `unit` is not a unit a declaration may name, or null: systemd's grammar, an instance not a template, a type's suffix. */
export function unitNameProblem(unit: unknown): string | null {
  if (typeof unit !== "string") return "must be a string";
  if (unit.length > UNIT_NAME_MAX) return `is longer than ${UNIT_NAME_MAX} characters`;
  if (!UNIT_NAME.test(unit))
    return "must be a systemd unit name: letters, digits and :-_.\\, with one @ before an instance (getty@tty1.service)";
  if (!UNIT_SUFFIX.test(unit)) return "must end in .service, .socket, .timer, .path or .target";
  if (/@\.[a-z]+$/.test(unit))
    return "is a template, which systemd cannot run itself: name an instance of it (getty@tty1.service)";
  return null;
}

const ARCH_PACKAGE = /^[a-z0-9@_+][a-z0-9@._+-]{0,127}$/;

/** Why `name` is not a package name (Arch's: lower case, digits, @._+-, not starting with - or .), or null. */
export function packageNameProblem(name: unknown): string | null {
  if (typeof name !== "string") return "must be a string";
  if (name.includes("/")) return "must be a package name, not a path";
  if (!ARCH_PACKAGE.test(name)) return "must be a package name: a-z 0-9 @ . _ + -, not starting with . or -";
  return null;
}

/** Why `path` is not a path inside a bundle (relative, normalised, no `..`), or null. */
export function bundlePathProblem(path: unknown): string | null {
  if (typeof path !== "string") return "must be a string";
  if (path.startsWith("/")) return "must be relative to the bundle";
  const rule = pathProblem(`/${path}`);
  return rule;
}

/** No line breaks or other control characters: these values are written into unit files line by line. */
const UnitLine = z.lazy(() =>
  z
    .string()
    .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), "must not contain a line break or control character"),
);

export const ServiceResource = z.lazy(() =>
  z.strictObject({
    ...base,
    type: z.literal("service"),
    unit: checkedString(unitNameProblem),
    enabled: z.boolean().optional(),
    state: z.enum(["running", "stopped"]).optional(),
    restart_on: z.array(Name).optional(),
    /** The unit file the mesh writes to /etc/systemd/system/<unit>. */
    content: z
      .string()
      .refine((s) => !s.includes("\0"), "must not contain NUL")
      .optional(),
    /** On an adopted node: make the unit found running the mesh's rather than hold it. */
    takes: z.boolean().optional(),
  }),
);

export const PackageResource = z.lazy(() =>
  z.strictObject({
    ...base,
    type: z.literal("package"),
    name: checkedString(packageNameProblem),
    /** Exact: pkgver-pkgrel ("1.2.3-1"), optionally with an epoch ("2:1.0-1"); without -pkgrel any release of it. */
    version: z
      .string()
      .regex(/^([0-9]+:)?[0-9A-Za-z._+~]+(-[0-9]+(\.[0-9]+)?)?$/, "must be an exact version such as 1.2.3-1")
      .max(64)
      .optional(),
    /** On an adopted node: install the declared version over the one found rather than hold it. */
    takes: z.boolean().optional(),
  }),
);

/** The characters systemd reads at the front of ExecStart= as prefixes (-, @, :, +, !), not as the program. */
const EXEC_PREFIX = /^[-@:+!|]/;

/**
 * Why systemd would refuse `program` as ExecStart='s program (systemd.service(5)), or null: it loads such a unit
 * as "bad-setting", so it is refused here, before any working unit is replaced. An absolute path, or a file
 * name with no slash (looked up on systemd's fixed search path); nothing it would read as a prefix.
 */
export function programProblem(program: string | undefined): string | null {
  if (program === undefined) return null;
  if (program === "") return "must name a program, not be empty";
  if (EXEC_PREFIX.test(program))
    return `"${program}" starts with ${program[0]}, which systemd reads as an ExecStart= prefix, not the program`;
  return programPathProblem(program, "which systemd refuses");
}

/**
 * Why `program` (an argv's first word) names no one program wherever it is started from, or null: an absolute
 * path, or a bare name looked up on the search path. A relative path means whatever the directory it starts
 * in holds: a process refuses it (systemd does), and an action the same, rather than fail with ENOENT later.
 */
export function programPathProblem(program: string, why: string): string | null {
  if (program === "") return "must name a program, not be empty";
  if (program.startsWith("/")) {
    if (program.endsWith("/")) return `"${program}" names a directory, not a program`;
    return null;
  }
  if (program.includes("/"))
    return `"${program}" is a relative path, ${why}: give an absolute path, or a bare name it finds on its search path`;
  if (program === "." || program === "..") return `"${program}" is not a program`;
  return null;
}

const BundleFile = z.lazy(() =>
  z
    .strictObject({
      path: checkedString(bundlePathProblem),
      content: z.string().optional(),
      content_b64: z.base64("must be standard base64").optional(),
      mode: OctalMode.optional(),
    })
    .superRefine((f, ctx) => {
      if ((f.content === undefined) === (f.content_b64 === undefined))
        ctx.addIssue({ code: "custom", path: ["content"], message: "give one of content, content_b64" });
    }),
);

export const ProcessResource = z.lazy(() =>
  z
    .strictObject({
      ...base,
      type: z.literal("process"),
      name: Name,
      /** argv; the program is an absolute path or a bare name systemd finds on its own fixed search path. */
      exec: z.array(UnitLine).min(1, "must name a program"),
      bundle: z.array(BundleFile).optional(),
      /** A systemd calendar expression (systemd.time(7)); systemd itself judges it where it is applied. */
      schedule: UnitLine.pipe(z.string().min(1).max(200)).optional(),
      /** On an adopted node: make the process found running under its units the mesh's rather than hold it. */
      takes: z.boolean().optional(),
    })
    .superRefine((r, ctx) => {
      const program = programProblem(r.exec[0]);
      if (program) ctx.addIssue({ code: "custom", path: ["exec", 0], message: program });
      const seen = new Set<string>();
      (r.bundle ?? []).forEach((f, i) => {
        if (seen.has(f.path))
          ctx.addIssue({ code: "custom", path: ["bundle", i, "path"], message: "is given more than once" });
        seen.add(f.path);
      });
      // a file cannot also be a directory of another
      (r.bundle ?? []).forEach((f, i) => {
        const parent = [...seen].find((other) => other.startsWith(`${f.path}/`));
        if (parent)
          ctx.addIssue({
            code: "custom",
            path: ["bundle", i, "path"],
            message: `is also a directory, holding "${parent}"`,
          });
      });
    }),
);

/** A resource's own flag `takes`: on an adopted node, make what is found the mesh's rather than hold it. */
const takes = (r: { takes?: boolean }): boolean => r.takes === true;
const named = (field: string, names: readonly string[] | undefined): Named[] =>
  (names ?? []).map((name) => ({ field, name }));

/**
 * Every kind the vocabulary knows, by type: its schema and its facts (kind.ts). A host implements some of them
 * and refuses the rest. A new type is one kind here, its applier, and its family's list of appliers.
 */
export const KINDS = {
  file: kind("file", FileResource, {
    pathsOf: (r) => [r.path],
    madeOf: (r) => [r.path],
    pathIsFile: true,
    secretsOf: (r) => named("secret", r.secret === undefined ? [] : [r.secret]),
  }),
  directory: kind("directory", DirectoryResource, { pathsOf: (r) => [r.path], madeOf: (r) => [r.path] }),
  action: kind("action", ActionResource, { refsOf: (r) => named("on", r.on) }),
  service: kind("service", ServiceResource, {
    refsOf: (r) => named("restart_on", r.restart_on),
    adopted: { takes },
  }),
  package: kind("package", PackageResource, { adopted: { takes } }),
  process: kind("process", ProcessResource, { adopted: { takes } }),
  image: kind("image", ImageResource),
  network: kind("network", NetworkResource, { uniqueKeysOf: runtimeName("network name") }),
  volume: kind("volume", VolumeResource, { uniqueKeysOf: runtimeName("volume name") }),
  container: kind("container", ContainerResource, {
    uniqueKeysOf: containerKeys,
    refsOf: (r) => named("restart_on", r.restart_on),
    adopted: { takes },
  }),
  overlay: kind("overlay", OverlayResource, { uniqueKeysOf: overlayKeys }),
} as const;

/** Each kind's schema, by type: what the declaration's own reference (docs/declaration.md) is checked against. */
// one cast: fromEntries forgets which key holds which schema, and KINDS is keyed by each kind's own type
export const RESOURCE_SCHEMAS = Object.fromEntries(Object.values(KINDS).map((k) => [k.type, k.schema])) as {
  [K in ResourceType]: (typeof KINDS)[K]["schema"];
};

/** Types the vocabulary names but whose schema later work defines (containers.md, overlay.md). */
export const PENDING_TYPES = [] as const;

export type ResourceType = keyof typeof KINDS;
export type FileResource = z.infer<typeof FileResource>;
export type DirectoryResource = z.infer<typeof DirectoryResource>;
export type ActionResource = z.infer<typeof ActionResource>;
export type ServiceResource = z.infer<typeof ServiceResource>;
export type PackageResource = z.infer<typeof PackageResource>;
export type ProcessResource = z.infer<typeof ProcessResource>;
/** The resource of each type, by type. */
type ResourceByType = { [K in ResourceType]: z.infer<(typeof KINDS)[K]["schema"]> };
export type Resource = ResourceByType[ResourceType];

const FACTS: { [K in ResourceType]: KindFacts<ResourceByType[K]> } = KINDS;

/** The facts of the kind `type`, over its own resources (`factsOf(r.type).pathsOf?.(r)`). */
export function factsOf<K extends ResourceType>(type: K): KindFacts<ResourceByType[K]> {
  return FACTS[type];
}

export function isResourceType(type: string): type is ResourceType {
  return Object.hasOwn(KINDS, type);
}

/** The absolute paths `r` owns on the machine (its kind's `pathsOf`): none for most kinds. */
export const pathsOf = (r: Resource): string[] => factsOf(r.type).pathsOf?.(r) ?? [];

/** What `r` makes that a resource after it may rely on (its kind's `madeOf`): the plan's `made`. */
export const madeOf = (r: Resource): string[] => factsOf(r.type).madeOf?.(r) ?? [];

/** A path a resource owns, as a key no other resource may give. */
const pathKey = (path: string): UniqueKey => ({
  space: "path",
  key: path,
  field: "path",
  clash: (earlier) => `is also declared by "${earlier}"`,
});

/** Every value `r` gives that no other resource may give in the same space: its paths, and its kind's keys. */
export const uniqueKeysOf = (r: Resource): UniqueKey[] => [
  ...pathsOf(r).map(pathKey),
  ...(factsOf(r.type).uniqueKeysOf?.(r) ?? []),
];

/** The declaration's secrets `r` reads, each with the field that names it. */
export const secretsOf = (r: Resource): Named[] => factsOf(r.type).secretsOf?.(r) ?? [];

/** The other resources `r` names by id, each with the field that names it. */
export const refsOf = (r: Resource): Named[] => factsOf(r.type).refsOf?.(r) ?? [];
