// Every resource type as a zod schema; the TypeScript types are inferred from them, never written twice.
import { z } from "zod";
import { nameProblem, pathProblem } from "./names.ts";

export const Name = z.string().superRefine((v, ctx) => {
  const problem = nameProblem(v);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

export const AbsPath = z.string().superRefine((v, ctx) => {
  const problem = pathProblem(v);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

export const OctalMode = z
  .string()
  .regex(/^0?[0-7]{3,4}$/, 'must be an octal string such as "0644"')
  .refine((v) => Number.parseInt(v, 8) <= 0o7777, "must be at most 07777");

/** A user or group: a name as useradd allows it, or a numeric id. */
export const Principal = z.union([
  z.string().regex(/^([a-z_][a-z0-9_-]{0,31}\$?|[0-9]{1,10})$/, "must be a user/group name or a numeric id"),
  z.number().int().min(0).max(4294967294),
]);

const base = { id: Name };

export const FileResource = z
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
  });

export const DirectoryResource = z.strictObject({
  ...base,
  type: z.literal("directory"),
  path: AbsPath,
  mode: OctalMode.optional(),
  owner: Principal.optional(),
  group: Principal.optional(),
  purge: z.boolean().default(false),
});

export const ActionResource = z.strictObject({
  ...base,
  type: z.literal("action"),
  run: z
    .array(z.string().refine((s) => !s.includes("\0"), "must not contain NUL"))
    .min(1, "must name a program"),
  on: z.array(Name).optional(),
  creates: AbsPath.optional(),
  timeout_s: z.number().int().min(1).max(86_400).optional(),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"), z.string())
    .optional(),
});

export const ServiceResource = z.strictObject({
  ...base,
  type: z.literal("service"),
  unit: z
    .string()
    .regex(
      /^[a-zA-Z0-9:_.@-]{1,250}\.(service|socket|timer|path|mount|target)$/,
      "must be a systemd unit name",
    ),
  enabled: z.boolean().optional(),
  state: z.enum(["running", "stopped"]).optional(),
  restart_on: z.array(Name).optional(),
  content: z.string().optional(),
});

export const PackageResource = z.strictObject({
  ...base,
  type: z.literal("package"),
  name: z.string().regex(/^[a-z0-9@_+][a-z0-9@._+-]{0,127}$/, "must be a package name (no path)"),
  version: z
    .string()
    .regex(/^[0-9A-Za-z.:+_~-]{1,64}$/, "must be an exact version")
    .optional(),
});

export const ProcessResource = z.strictObject({
  ...base,
  type: z.literal("process"),
  name: Name,
  exec: z.array(z.string()).min(1, "must name a program"),
  bundle: z
    .array(
      z.strictObject({
        path: z.string(),
        content: z.string().optional(),
        content_b64: z.base64().optional(),
        mode: OctalMode.optional(),
      }),
    )
    .optional(),
  schedule: z.string().min(1).max(200).optional(),
});

/** The types the vocabulary knows, by name; a host implements some of them and refuses the rest. */
export const RESOURCE_SCHEMAS = {
  file: FileResource,
  directory: DirectoryResource,
  action: ActionResource,
  service: ServiceResource,
  package: PackageResource,
  process: ProcessResource,
} as const;

/** Types the vocabulary names but whose schema later work defines (containers.md, overlay.md). */
export const PENDING_TYPES = ["container", "network", "volume", "image", "overlay"] as const;

export type ResourceType = keyof typeof RESOURCE_SCHEMAS;
export type FileResource = z.infer<typeof FileResource>;
export type DirectoryResource = z.infer<typeof DirectoryResource>;
export type ActionResource = z.infer<typeof ActionResource>;
export type ServiceResource = z.infer<typeof ServiceResource>;
export type PackageResource = z.infer<typeof PackageResource>;
export type ProcessResource = z.infer<typeof ProcessResource>;
export type Resource = { [K in ResourceType]: z.infer<(typeof RESOURCE_SCHEMAS)[K]> }[ResourceType];

export function isResourceType(type: string): type is ResourceType {
  return Object.hasOwn(RESOURCE_SCHEMAS, type);
}
