// container: still the one declared when its spec digest matches — every declared field and the content of
// what it reads at creation (env-files, files bind-mounted directly; nothing inside a mounted directory), read
// as the state stands when the apply reaches it. A mismatch recreates it (stop, remove, create, start) and says
// which file or field changed; `restart` is never the answer to a changed env-file (containers.md).

import { createHash } from "node:crypto";
import { closeSync } from "node:fs";
import {
  CONTAINER_STOP_TIMEOUT_S,
  type ContainerInfo,
  createArgv,
  envFileFds,
  isError,
  machineRuntimes,
  type Runtime,
  type RuntimeFinder,
} from "../../../system/arch/index.ts";
import { entryAt, readFileAt } from "../../../system/index.ts";
import type { ContainerResource, NetworkResource, RuntimeKind } from "../../../vocabulary/index.ts";
import { inSubnet } from "../../../vocabulary/index.ts";
import { stepsOf } from "../../step.ts";
import type { Applier, DecideContext, Executed, RecordBase, Step } from "../../types.ts";
import { type Session, sessionOf } from "./session.ts";

export interface ContainerRecord extends RecordBase {
  type: "container";
  name: string;
  runtime: RuntimeKind;
  /** True when the mesh made it; false when it was found on an adopted node and is held. */
  created: boolean;
  /** The spec digest written on it as the `mesh-host.spec` label. */
  spec?: string;
  /** A digest of each declared field, so a recreate can say which one changed. */
  fields?: Record<string, string>;
  /** What it read at creation: path → content digest. */
  read?: Record<string, string>;
}

interface Plan {
  name: string;
  runtime: RuntimeKind;
  spec: string;
  fields: Record<string, string>;
  read: Record<string, string>;
  create: string[];
  /** `network connect` argv for every network after the first. */
  connects: string[][];
  start: boolean;
  /** A found container to stop and remove first. */
  replace: boolean;
}

const sha = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");

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

const declaredOf = <T extends { type: string }>(ctx: DecideContext, type: T["type"]) =>
  (ctx.declared ?? []).filter((r) => r.type === type) as unknown as T[];

/** The reference it runs: an image resource's `ref` when it names one, else its own. */
function imageRef(w: ContainerResource, ctx: DecideContext): { ref: string; resource?: string } {
  const image = declaredOf<{ type: "image"; id: string; ref: string }>(ctx, "image").find(
    (i) => i.id === w.image,
  );
  return image ? { ref: image.ref, resource: image.id } : { ref: w.image };
}

/** Every declared field that shapes the container, a network declared here by its own definition too. */
function fieldsOf(w: ContainerResource, ctx: DecideContext): Record<string, string> {
  const nets = new Map(declaredOf<NetworkResource>(ctx, "network").map((n) => [n.name, n]));
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

type Inputs = { read: Record<string, string>; fromDisk: string[] } | { field: string; problem: string };

/** The content digest of each file it reads at creation: the host's record of it, else the machine's copy. */
async function readInputs(w: ContainerResource, ctx: DecideContext): Promise<Inputs> {
  const read: Record<string, string> = {};
  const fromDisk: string[] = [];
  const dirs = new Set(declaredOf<{ type: "directory"; path: string }>(ctx, "directory").map((d) => d.path));
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
function whatChanged(
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

const step = stepsOf("container");

/** A static address on a network this declaration does not define: checked against the runtime's subnet. */
async function addressProblems(
  w: ContainerResource,
  ctx: DecideContext,
  s: Session,
  rt: Runtime,
): Promise<{ field: string; problem: string } | null> {
  const declared = new Set(declaredOf<NetworkResource>(ctx, "network").map((n) => n.name));
  for (const [i, n] of (w.networks ?? []).entries()) {
    if (!n.ip || declared.has(n.name)) continue;
    const net = await s.ask(rt, "network", n.name);
    const field = `networks.${i}.ip`;
    if (isError(net)) return { field, problem: net.error };
    if (!net) return { field, problem: `network "${n.name}" does not exist and is not declared` };
    if (!net.subnets.some((sub) => inSubnet(n.ip!, sub.subnet)))
      return {
        field,
        problem: `${n.ip} is outside network "${n.name}"'s subnet ${net.subnets.map((x) => x.subnet).join(", ") || "(none)"}`,
      };
  }
  return null;
}

export function containerApplier(
  finder: RuntimeFinder = machineRuntimes(),
): Applier<ContainerResource, ContainerRecord> {
  return {
    type: "container",
    // what it reads at creation, as the steps before left it, and the actions it is `on`
    traits: { readsChanges: () => true },

    async decide(w, record, ctx) {
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(w.runtime ?? record?.runtime);
      if (typeof rt === "string") return step(w.id, "failed", "refuse", rt, undefined, "runtime");
      const bad = await addressProblems(w, ctx, s, rt);
      if (bad) return step(w.id, "failed", "refuse", bad.problem, undefined, bad.field);
      const found = await s.ask(rt, "container", w.name);
      if (isError(found))
        return step(
          w.id,
          "failed",
          "fail",
          `the runtime could not say whether ${w.name} is here: ${found.error}`,
        );
      const ours = found !== null && (found.spec !== undefined || record?.created === true);
      const held: ContainerRecord = { type: "container", name: w.name, runtime: rt.kind, created: false };
      if (found && !ours && ctx.mode === "adopted" && !w.takes)
        return step(
          w.id,
          "unchanged",
          "hold",
          `${w.name} held: found on this adopted node (takes: true replaces it)`,
          {
            record: held,
          },
        );
      const inputs = await readInputs(w, ctx);
      if ("problem" in inputs) return step(w.id, "failed", "refuse", inputs.problem, undefined, inputs.field);
      const { read } = inputs;
      const fields = fieldsOf(w, ctx);
      const spec = specDigest(fields, read);
      const { create, connects } = createArgv(w, ctx.ports.root, imageRef(w, ctx).ref, spec);
      const plan: Plan = {
        name: w.name,
        runtime: rt.kind,
        spec,
        fields,
        read,
        create,
        connects,
        start: w.state === "running",
        replace: false,
      };
      const check = uncertain(w, ctx, inputs.fromDisk);
      if (!found) {
        const again = record?.created === true;
        return step(
          w.id,
          again ? "repaired" : "created",
          "create",
          `${w.name} ${again ? "created again: it was gone" : "created"}${check}`,
          plan,
        );
      }
      const image = imageRef(w, ctx).resource;
      const why = ours
        ? whatChanged(found, record, spec, fields, read)
        : ["replaced the container found under its name"];
      if (image && ctx.changed.has(image)) why.push(`image ${image} changed`);
      else if (image && why.length === 0) {
        const now = await s.ask(rt, "image", imageRef(w, ctx).ref);
        if (now && !isError(now) && now.id !== found.image)
          why.push(`image ${imageRef(w, ctx).ref} is now ${now.id.slice(0, 12)}`);
      }
      if (why.length)
        return step(w.id, "updated", "recreate", `recreated: ${why.join(", ")}${check}`, {
          ...plan,
          replace: true,
        });
      const next: ContainerRecord = { ...held, created: true, spec, fields, read };
      const running = found.status === "running" || found.status === "restarting";
      if (w.state === "running" && !running)
        return step(w.id, "repaired", "start", `${w.name} started (it was ${found.status})${check}`, {
          record: next,
        });
      if (w.state === "stopped" && running)
        return step(w.id, "updated", "stop", `${w.name} stopped${check}`, { record: next });
      const fired = (w.restart_on ?? []).filter((id) => ctx.changed.has(id));
      if (fired.length && w.state === "running")
        return step(w.id, "updated", "restart", `restarted: ${fired.join(", ")} changed${check}`, {
          record: next,
        });
      return step(w.id, "unchanged", record ? "none" : "note", `${w.name} is as declared${check}`, {
        record: next,
      });
    },

    async decideRemoval(id, record, ctx) {
      if (!record.created)
        return step(
          id,
          "unchanged",
          "forget",
          `${record.name} left as it was found: it was held, never the mesh's`,
        );
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(record.runtime);
      if (typeof rt === "string") return step(id, "failed", "fail", rt);
      const found = await s.ask(rt, "container", record.name);
      if (isError(found)) return step(id, "failed", "fail", found.error);
      if (!found)
        return step(id, "unchanged", "forget", `${record.name} was already gone: nothing was removed`);
      if (found.spec === undefined)
        return step(
          id,
          "unchanged",
          "forget",
          `${record.name} left in place: it is not the container the mesh made`,
        );
      return step(id, "removed", "remove", `${record.name} stopped and removed (the mesh created it)`);
    },

    async execute(st, w, record, ctx): Promise<Executed<ContainerRecord>> {
      const s = sessionOf(ctx, finder);
      const data = (st.data ?? {}) as { record?: ContainerRecord } & Partial<Plan>;
      const rt = s.runtime(
        (data.runtime ?? data.record?.runtime ?? record?.runtime) as RuntimeKind | undefined,
      );
      const keep = record ?? null;
      if (st.action === "hold" || st.action === "none" || st.action === "note")
        return { did: st.did, detail: st.detail, record: data.record ?? keep };
      if (st.action === "forget") return { did: st.did, detail: st.detail, record: null };
      if (st.action === "fail" || st.action === "refuse" || typeof rt === "string")
        return { did: "failed", detail: typeof rt === "string" ? rt : st.detail, record: keep };
      const name = data.name ?? data.record?.name ?? record!.name;
      s.forget(rt, "container", name);
      const verb = async (args: string[], timeoutMs?: number, fds?: number[]) => {
        const r = await rt.must(args, timeoutMs, fds);
        return isError(r) ? r.error : null;
      };
      const stopT = ["-t", String(CONTAINER_STOP_TIMEOUT_S)];
      const removeArgs = ["container", "rm", "-f", ...(rt.kind === "podman" ? ["-t", "0"] : []), name];
      const fail = (why: string, rec: ContainerRecord | null = keep) => ({
        did: "failed" as const,
        detail: why,
        record: rec,
      });
      const stopWait = (CONTAINER_STOP_TIMEOUT_S + 60) * 1000;
      switch (st.action) {
        case "remove": {
          await verb(["container", "stop", ...stopT, name], stopWait);
          const err = await verb(removeArgs);
          s.forget(rt, "container", name);
          const gone = await s.ask(rt, "container", name);
          return gone === null
            ? { did: "removed", detail: st.detail, record: null }
            : fail(`${name} could not be removed: ${err ?? "still there"}`);
        }
        case "start":
        case "stop":
        case "restart": {
          const err = await verb(
            ["container", st.action, ...(st.action === "start" ? [] : stopT), name],
            stopWait,
          );
          if (err) return fail(err, data.record ?? keep);
          return readBack(s, rt, name, st.action !== "stop", st, data.record!);
        }
        case "create":
        case "recreate": {
          const plan = data as Plan;
          if (plan.replace) ctx.ports.log.info({ id: st.id, container: name }, st.detail);
          const gone: ContainerRecord = { type: "container", name, runtime: rt.kind, created: true };
          if (plan.replace) {
            await verb(["container", "stop", ...stopT, name], stopWait);
            const err = await verb(removeArgs);
            if (err) return fail(`${name} could not be removed to be recreated: ${err}`);
          }
          const fds = envFileFds(w!, ctx.ports.root);
          if (typeof fds === "string") return fail(`${name} could not be created: ${fds}`, keep);
          const created = await verb(plan.create, undefined, fds).finally(() => {
            for (const fd of fds) closeSync(fd);
          });
          if (created) return fail(`${name} could not be created: ${created}`, plan.replace ? gone : keep);
          for (const c of plan.connects) {
            const err = await verb(c);
            if (err) {
              await verb(removeArgs);
              return fail(`${name} could not join a network, and was removed: ${err}`, gone);
            }
          }
          const next: ContainerRecord = { ...gone, spec: plan.spec, fields: plan.fields, read: plan.read };
          if (plan.start) {
            const err = await verb(["container", "start", name]);
            if (err) {
              // not left in Created: a half-made container would pass for the declared one next time
              await verb(removeArgs);
              return fail(`${name} failed to start and was removed: ${err}`, gone);
            }
          }
          return readBack(s, rt, name, plan.start, st, next, removeArgs);
        }
        default:
          return fail(st.detail);
      }
    },
  };
}

/** Said when the plan read a file from the machine that an action running before the container may rewrite. */
function uncertain(w: ContainerResource, ctx: DecideContext, fromDisk: string[]): string {
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

async function readBack(
  s: Session,
  rt: Runtime,
  name: string,
  running: boolean,
  st: Step,
  next: ContainerRecord,
  removeArgs?: string[],
): Promise<Executed<ContainerRecord>> {
  s.forget(rt, "container", name);
  const back = await s.ask(rt, "container", name);
  if (isError(back) || !back)
    return {
      did: "failed",
      detail: `${name} read back: ${isError(back) ? back.error : "not there"}`,
      record: next,
    };
  const up = back.status === "running" || back.status === "restarting";
  if (running && !up) {
    if (removeArgs) {
      const logs = await rt.run(["container", "logs", "--tail", "5", name]);
      await rt.run(removeArgs);
      s.forget(rt, "container", name);
      const tail = `${logs.stdout}${logs.stderr}`.trim().replace(/\s+/g, " ").slice(-300);
      return {
        did: "failed",
        detail: `${name} ${back.status} right after start and was removed${tail ? `: ${tail}` : ""}`,
        record: { ...next, spec: undefined, fields: undefined, read: undefined },
      };
    }
    return { did: "failed", detail: `${name} read back ${back.status}, not running`, record: next };
  }
  if (!running && up)
    return { did: "failed", detail: `${name} read back running, not stopped`, record: next };
  if (back.spec !== next.spec)
    return { did: "failed", detail: `${name} read back without the spec it was given`, record: next };
  return {
    did: st.did,
    detail: `${st.detail}; read back ${back.status} ${back.id.slice(0, 12)}`,
    record: next,
  };
}
