// A container's spec digest (containers.md): every declared field and the content of what it reads at creation
// (env-files, files bind-mounted directly; nothing inside a mounted directory), read as the state stands when the
// apply reaches it; written on the container as a label, so a mismatch says which file or field changed.

import * as z from "zod";
import type { ContainerInfo } from "../../../system/arch/index.ts";
import { entryAt, readFileAt, sha256 } from "../../../system/index.ts";
import { type ContainerResource, type Resource, RuntimeKind } from "../../../vocabulary/index.ts";
import { type DecideContext, recordOf } from "../../types.ts";

export const ContainerRecord = recordOf("container", {
  name: z.string(),
  runtime: RuntimeKind,
  /** True when the mesh made it; false when it was found on an adopted node and is held. */
  created: z.boolean(),
  /** The spec digest written on it as the `mesh-host.spec` label. */
  spec: z.string().optional(),
  /** A digest of each declared field, so a recreate can say which one changed. */
  fields: z.record(z.string(), z.string()).optional(),
  /** What it read at creation: path → content digest. */
  read: z.record(z.string(), z.string()).optional(),
});
export type ContainerRecord = z.infer<typeof ContainerRecord>;

export const sha = (data: string | Uint8Array) => sha256(typeof data === "string" ? Buffer.from(data) : data);

/** JSON with object keys sorted at every depth, so equal values digest equally. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v ?? null);
}

/** The declaration's resources of one type, narrowed to it. */
export const declaredOf = <T extends Resource["type"]>(ctx: DecideContext, type: T) =>
  (ctx.declared ?? []).filter((r): r is Extract<Resource, { type: T }> => r.type === type);

/** The reference it runs: an image resource's `ref` when it names one, else its own. */
export function imageRef(w: ContainerResource, ctx: DecideContext): { ref: string; resource?: string } {
  const image = declaredOf(ctx, "image").find((i) => i.id === w.image);
  return image ? { ref: image.ref, resource: image.id } : { ref: w.image };
}

/** Every declared field that shapes the container, a network declared here by its own definition too. */
export function fieldsOf(w: ContainerResource, ctx: DecideContext): Record<string, string> {
  const nets = new Map(declaredOf(ctx, "network").map((n) => [n.name, n]));
  const fields: Record<string, unknown> = {
    name: w.name,
    image: imageRef(w, ctx).ref,
    command: w.command,
    env: w.env,
    env_files: w.env_files ?? [],
    mounts: w.mounts ?? [],
    ports: w.ports ?? [],
    networks: (w.networks ?? []).map((n) => {
      const net = nets.get(n.name);
      return { ...n, network: net && { d: net.driver, s: net.subnet, g: net.gateway, i: net.internal } };
    }),
    dns: w.dns ?? [],
    restart: w.restart,
    labels: w.labels,
    user: w.user,
    init: w.init,
  };
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, sha(canonical(v)).slice(0, 16)]));
}

export function specDigest(fields: Record<string, string>, read: Record<string, string>): string {
  return sha(canonical({ v: 1, fields, read }));
}

export type Inputs =
  | { read: Record<string, string>; fromDisk: string[] }
  | { field: string; problem: string };

/** The content digest of each file it reads at creation: the host's record of it, else the machine's copy. */
export async function readInputs(w: ContainerResource, ctx: DecideContext): Promise<Inputs> {
  const read: Record<string, string> = {};
  const fromDisk: string[] = [];
  const dirs = new Set(declaredOf(ctx, "directory").map((d) => d.path));
  const one = async (path: string, field: string, dirOk: boolean): Promise<string | null> => {
    const wrote = ctx.wrote?.(path);
    if (wrote) {
      read[path] = wrote;
      return null;
    }
    // walked with no link followed: an env-file that is a link (or has one above it) is refused; a bind source
    // through a link is the runtime's to follow (/var/run is one on most machines), and the host reads none of it
    const st = entryAt(ctx.ports.root, path);
    const link = typeof st === "string" || st?.kind === "link";
    if (link && dirOk) return null;
    if (typeof st === "string") return `${field}: ${st}`;
    if (!st)
      return dirOk && (dirs.has(path) || ctx.made.has(path)) ? null : `${field}: ${path} does not exist`;
    if (st.kind === "link") return `${field}: ${path} is a symbolic link; it is not followed`;
    if (st.kind === "directory") return dirOk ? null : `${field}: ${path} is a directory`;
    const bytes = await readFileAt(ctx.ports.root, path);
    if (bytes === null || typeof bytes === "string") return `${field}: ${bytes ?? `${path} does not exist`}`;
    read[path] = sha(bytes.bytes);
    fromDisk.push(path);
    return null;
  };
  for (const [i, p] of (w.env_files ?? []).entries()) {
    const problem = await one(p, `env_files.${i}`, false);
    if (problem) return { field: `env_files.${i}`, problem };
  }
  for (const [i, m] of (w.mounts ?? []).entries()) {
    if (m.type !== "bind") continue;
    // a directory is the service's own data: nothing inside it is part of the spec
    const problem = await one(m.source, `mounts.${i}.source`, true);
    if (problem) return { field: `mounts.${i}.source`, problem };
  }
  return { read, fromDisk };
}

/** Why the found container is not the declared one, file by file and field by field, or [] when it is. */
export function whatChanged(
  found: ContainerInfo,
  record: ContainerRecord | undefined,
  spec: string,
  fields: Record<string, string>,
  read: Record<string, string>,
): string[] {
  if (found.spec === spec) return [];
  const files = Object.keys(read).filter(
    (p) => record?.read?.[p] !== undefined && record.read[p] !== read[p],
  );
  const named = Object.keys(fields).filter(
    (k) => record?.fields?.[k] !== undefined && record.fields[k] !== fields[k],
  );
  const why = [...files.map((p) => `${p} changed`), ...named.map((k) => `${k} changed`)];
  if (why.length) return why;
  return [record?.spec === found.spec ? "what it reads changed" : "its spec differs from its label"];
}

/** Said when the plan read a file from the machine that an action running before the container may rewrite. */
export function uncertain(w: ContainerResource, ctx: DecideContext, fromDisk: string[]): string {
  if (!fromDisk.length) return "";
  const before = (ctx.declared ?? []).slice(
    0,
    (ctx.declared ?? []).findIndex((r) => r.id === w.id),
  );
  const actions = before.filter((r) => r.type === "action" && ctx.changed.has(r.id)).map((r) => r.id);
  return actions.length
    ? `; check: ${fromDisk.join(", ")} read from the machine after ${actions.join(", ")}`
    : "";
}
