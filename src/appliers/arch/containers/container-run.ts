// Carrying out a container's steps (container.ts decides them): a remove, a change of state, a create or a
// recreate, each read back from the runtime; a container that cannot be made whole is removed, never left.

import { closeSync } from "node:fs";
import {
  CONTAINER_STOP_TIMEOUT_S,
  CONTAINER_STOP_WAIT_MS,
  envFileFds,
  isError,
  type Runtime,
  type RuntimeFinder,
} from "../../../system/arch/index.ts";
import type { ContainerResource, Did, RuntimeKind } from "../../../vocabulary/index.ts";
import type { DecideContext, Executed, StepFor, StepOf } from "../../types.ts";
import type { ContainerRecord } from "./container-spec.ts";
import { type Session, sessionOf } from "./session.ts";

export interface Plan {
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

/** A step that keeps the container as it is, or only changes its state: the record it will have. */
interface KeptData {
  record: ContainerRecord;
}

/** The container applier's steps, keyed by action: each executor below is handed its own. */
export type ContainerStep =
  | StepOf<"none" | "note", KeptData>
  | StepOf<"start" | "stop" | "restart", KeptData>
  // the resource it makes, named in the step (balena-supervisor's `target`): its executor is handed it, never `!`
  | StepOf<"create" | "recreate", Plan & { wanted: ContainerResource }>
  | StepOf<"remove" | "forget" | "fail" | "refuse">;

const STOP_ARGS = ["-t", String(CONTAINER_STOP_TIMEOUT_S)];

const removeArgs = (rt: Runtime, name: string) => [
  "container",
  "rm",
  "-f",
  ...(rt.kind === "podman" ? ["-t", "0"] : []),
  name,
];

/** A runtime verb: null when it did what it was asked, else the runtime's words. */
async function verb(rt: Runtime, args: string[], timeoutMs?: number, fds?: number[]): Promise<string | null> {
  const r = await rt.must(args, timeoutMs, fds);
  return isError(r) ? r.error : null;
}

/** What an executor acts through: the session and the runtime, the container's cached answer forgotten. */
interface Acting {
  s: Session;
  rt: Runtime;
  name: string;
}

function actingOn(
  ctx: DecideContext,
  finder: RuntimeFinder,
  runtime: RuntimeKind | undefined,
  name: string,
): Acting | string {
  const s = sessionOf(ctx, finder);
  const rt = s.runtime(runtime);
  if (typeof rt === "string") return rt;
  s.forget(rt, "container", name);
  return { s, rt, name };
}

const failed = (detail: string, record: ContainerRecord | null): Executed<ContainerRecord> => ({
  did: "failed",
  detail,
  record,
});

/** Stopped, removed, and read back gone. */
export async function removeContainer(
  st: StepFor<ContainerStep, "remove">,
  record: ContainerRecord | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
): Promise<Executed<ContainerRecord>> {
  const keep = record ?? null;
  if (!record) return failed(st.detail, keep);
  const on = actingOn(ctx, finder, record.runtime, record.name);
  if (typeof on === "string") return failed(on, keep);
  const { s, rt, name } = on;
  await verb(rt, ["container", "stop", ...STOP_ARGS, name], CONTAINER_STOP_WAIT_MS);
  const err = await verb(rt, removeArgs(rt, name));
  s.forget(rt, "container", name);
  const gone = await s.ask(rt, "container", name);
  return gone === null
    ? { did: "removed", detail: st.detail, record: null }
    : failed(`${name} could not be removed: ${err ?? "still there"}`, keep);
}

/** Started, stopped or restarted as the step says, and read back in that state. */
export async function changeState(
  st: StepFor<ContainerStep, "start" | "stop" | "restart">,
  record: ContainerRecord | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
): Promise<Executed<ContainerRecord>> {
  const next = st.data.record;
  const on = actingOn(ctx, finder, next.runtime, next.name);
  if (typeof on === "string") return failed(on, record ?? null);
  const { s, rt, name } = on;
  const err = await verb(
    rt,
    ["container", st.action, ...(st.action === "start" ? [] : STOP_ARGS), name],
    CONTAINER_STOP_WAIT_MS,
  );
  if (err) return failed(err, next);
  return readBack(s, rt, name, st.action !== "stop", st, next);
}

/**
 * Made from its plan (a found one stopped and removed first), joined to its other networks, started, and read
 * back; a container that cannot be made whole is removed, never left to pass for the declared one.
 */
export async function createContainer(
  st: StepFor<ContainerStep, "create" | "recreate">,
  w: ContainerResource,
  record: ContainerRecord | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
): Promise<Executed<ContainerRecord>> {
  const plan = st.data;
  const keep = record ?? null;
  const on = actingOn(ctx, finder, plan.runtime, plan.name);
  if (typeof on === "string") return failed(on, keep);
  const { s, rt, name } = on;
  const rm = removeArgs(rt, name);
  if (plan.replace) ctx.ports.log.info({ id: st.id, container: name }, st.detail);
  const gone: ContainerRecord = { type: "container", name, runtime: rt.kind, created: true };
  if (plan.replace) {
    await verb(rt, ["container", "stop", ...STOP_ARGS, name], CONTAINER_STOP_WAIT_MS);
    const err = await verb(rt, rm);
    if (err) return failed(`${name} could not be removed to be recreated: ${err}`, keep);
  }
  const fds = envFileFds(w, ctx.ports.root);
  if (typeof fds === "string") return failed(`${name} could not be created: ${fds}`, keep);
  const created = await verb(rt, plan.create, undefined, fds).finally(() => {
    for (const fd of fds) closeSync(fd);
  });
  if (created) return failed(`${name} could not be created: ${created}`, plan.replace ? gone : keep);
  for (const c of plan.connects) {
    const err = await verb(rt, c);
    if (err) {
      await verb(rt, rm);
      return failed(`${name} could not join a network, and was removed: ${err}`, gone);
    }
  }
  const next: ContainerRecord = { ...gone, spec: plan.spec, fields: plan.fields, read: plan.read };
  if (plan.start) {
    const err = await verb(rt, ["container", "start", name]);
    if (err) {
      // not left in Created: a half-made container would pass for the declared one next time
      await verb(rt, rm);
      return failed(`${name} failed to start and was removed: ${err}`, gone);
    }
  }
  return readBack(s, rt, name, plan.start, st, next, rm);
}

async function readBack(
  s: Session,
  rt: Runtime,
  name: string,
  running: boolean,
  st: { did: Did; detail: string },
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
