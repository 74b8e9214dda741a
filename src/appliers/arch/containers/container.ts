// container: still the one declared when its spec digest matches (container-spec.ts): a mismatch recreates it
// (stop, remove, create, start) and says which file or field changed; `restart` is never the answer to a changed
// env-file (containers.md). What each step does is container-run.ts's.

import {
  type ContainerInfo,
  createArgv,
  isError,
  machineRuntimes,
  type Runtime,
  type RuntimeFinder,
} from "../../../system/arch/index.ts";
import type { ContainerResource } from "../../../vocabulary/index.ts";
import { inSubnet } from "../../../vocabulary/index.ts";
import { executeBy, failsAgain, forgets, recorded, stepsOf } from "../../step.ts";
import type { Applier, DecideContext, Executors, Found } from "../../types.ts";
import {
  type ContainerStep,
  changeState,
  createContainer,
  type Plan,
  removeContainer,
} from "./container-run.ts";
import {
  ContainerRecord,
  declaredOf,
  fieldsOf,
  type Inputs,
  imageRef,
  readInputs,
  specDigest,
  uncertain,
  whatChanged,
} from "./container-spec.ts";
import { declaredElsewhere, type Session, sessionOf, takenOver } from "./session.ts";

export type { ContainerRecord } from "./container-spec.ts";

const step = stepsOf<ContainerStep>("container");

/** A static address on a network this declaration does not define: checked against the runtime's subnet. */
async function addressProblems(
  w: ContainerResource,
  ctx: DecideContext,
  s: Session,
  rt: Runtime,
): Promise<{ field: string; problem: string } | null> {
  const declared = new Set(declaredOf(ctx, "network").map((n) => n.name));
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

/** The digests and argv a create (or recreate) needs, from what was read and what is declared. */
function planOf(
  w: ContainerResource,
  rt: Runtime,
  inputs: Extract<Inputs, { read: unknown }>,
  ctx: DecideContext,
): Plan {
  const { read } = inputs;
  const fields = fieldsOf(w, ctx);
  const spec = specDigest(fields, read);
  const { create, connects } = createArgv(w, ctx.ports.root, imageRef(w, ctx).ref, spec);
  const start = w.state === "running";
  return { name: w.name, runtime: rt.kind, spec, fields, read, create, connects, start, replace: false };
}

/** Why the found container must be made again: its spec, a found one replaced, or its image changed; [] if not. */
async function recreateWhy(
  w: ContainerResource,
  found: ContainerInfo,
  ours: boolean,
  record: ContainerRecord | undefined,
  plan: Plan,
  ctx: DecideContext,
  s: Session,
  rt: Runtime,
): Promise<string[]> {
  const { ref, resource: image } = imageRef(w, ctx);
  const why = ours
    ? whatChanged(found, record, plan.spec, plan.fields, plan.read)
    : ["replaced the container found under its name"];
  if (image && ctx.changed.has(image)) why.push(`image ${image} changed`);
  else if (image && why.length === 0) {
    const now = await s.ask(rt, "image", ref);
    if (now && !isError(now) && now.id !== found.image)
      why.push(`image ${ref} is now ${now.id.slice(0, 12)}`);
  }
  return why;
}

/** The found container is the declared one: started, stopped, restarted (restart_on) or left as it is. */
function stateStep(
  w: ContainerResource,
  record: ContainerRecord | undefined,
  found: ContainerInfo,
  next: ContainerRecord,
  check: string,
  ctx: DecideContext,
): ContainerStep {
  const running = found.status === "running" || found.status === "restarting";
  const data = { record: next };
  if (w.state === "running" && !running)
    return step(w.id, "repaired", "start", `${w.name} started (it was ${found.status})${check}`, data);
  if (w.state === "stopped" && running)
    return step(w.id, "updated", "stop", `${w.name} stopped${check}`, data);
  const fired = (w.restart_on ?? []).filter((id) => ctx.changed.has(id));
  if (fired.length && w.state === "running")
    return step(w.id, "updated", "restart", `restarted: ${fired.join(", ")} changed${check}`, data);
  return step(w.id, "unchanged", record ? "none" : "note", `${w.name} is as declared${check}`, data);
}

/**
 * Adopted mode's input: a container found under its name that the mesh did not make (no spec label of its
 * own) is the host's, held (apply/adopted.ts) until a declaration takes it: never recreated, stopped or
 * removed. What its decision refuses (a runtime, an address) or cannot ask is not held: it says why.
 */
async function foundUnlabelled(
  w: ContainerResource,
  ctx: DecideContext,
  finder: RuntimeFinder,
  held: ContainerRecord | undefined,
): Promise<Found<ContainerRecord> | false> {
  const s = sessionOf(ctx, finder);
  const rt = s.runtime(w.runtime ?? held?.runtime);
  if (typeof rt === "string" || (await addressProblems(w, ctx, s, rt))) return false;
  const found = await s.ask(rt, "container", w.name);
  if (isError(found) || found === null || found.spec !== undefined) return false;
  return {
    record: { type: "container", name: w.name, runtime: rt.kind, created: false },
    detail: `${w.name} held: found on this adopted node (takes: true replaces it)`,
  };
}

/** One executor per action of ContainerStep, over one runtime finder. */
function containerExecutors(
  finder: RuntimeFinder,
): Executors<ContainerStep, ContainerResource, ContainerRecord> {
  return {
    none: recorded,
    note: recorded,
    forget: forgets,
    fail: failsAgain,
    refuse: failsAgain,
    remove: (st, _w, record, ctx) => removeContainer(st, record, ctx, finder),
    start: (st, _w, record, ctx) => changeState(st, record, ctx, finder),
    stop: (st, _w, record, ctx) => changeState(st, record, ctx, finder),
    restart: (st, _w, record, ctx) => changeState(st, record, ctx, finder),
    create: (st, _w, record, ctx) => createContainer(st, st.data.wanted, record, ctx, finder),
    recreate: (st, _w, record, ctx) => createContainer(st, st.data.wanted, record, ctx, finder),
  };
}

export function containerApplier(
  finder: RuntimeFinder = machineRuntimes(),
): Applier<ContainerResource, ContainerRecord, ContainerStep> {
  return {
    type: "container",
    recordSchema: ContainerRecord,
    traits: {
      // what it reads at creation, as the steps before left it, and the actions it is `on`
      readsChanges: () => true,
      found: (w, ctx, held) => foundUnlabelled(w, ctx, finder, held),
      heldAs: (record) => (record.created ? undefined : record.name),
    },

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
      const inputs = await readInputs(w, ctx);
      if ("problem" in inputs) return step(w.id, "failed", "refuse", inputs.problem, undefined, inputs.field);
      const plan = planOf(w, rt, inputs, ctx);
      const check = uncertain(w, ctx, inputs.fromDisk);
      if (!found) {
        const again = record?.created === true;
        const said = again ? "created again: it was gone" : "created";
        const data = { ...plan, wanted: w };
        return step(w.id, again ? "repaired" : "created", "create", `${w.name} ${said}${check}`, data);
      }
      const why = await recreateWhy(w, found, ours, record, plan, ctx, s, rt);
      if (why.length)
        return step(w.id, "updated", "recreate", `recreated: ${why.join(", ")}${check}`, {
          ...plan,
          replace: true,
          wanted: w,
        });
      const { spec, fields, read } = plan;
      const kept: ContainerRecord = { type: "container", name: w.name, runtime: rt.kind, created: true };
      return stateStep(w, record, found, { ...kept, spec, fields, read }, check, ctx);
    },

    async decideRemoval(id, record, ctx) {
      const by = declaredElsewhere(ctx, "container", record.name, id);
      if (by) return step(id, "unchanged", "forget", takenOver(record.name, by));
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

    execute: executeBy(containerExecutors(finder)),
  };
}
