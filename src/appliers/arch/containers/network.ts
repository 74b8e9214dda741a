// network: made as declared and read back by `network inspect`; one the mesh made is recreated when its
// definition changes (the containers declared on it are recreated by their own digest), one it found is never
// replaced; undeclared, removed only when the mesh made it.

import type * as z from "zod";
import {
  isError,
  machineRuntimes,
  type NetworkInfo,
  type Runtime,
  type RuntimeFinder,
} from "../../../system/arch/index.ts";
import type { NetworkResource, Resource } from "../../../vocabulary/index.ts";
import { executeBy, stepsOf } from "../../step.ts";
import {
  type Applier,
  type DecideContext,
  type Executed,
  type Executors,
  recordOf,
  type StepFor,
  type StepOf,
} from "../../types.ts";
import {
  absentStep,
  isDone,
  lookUp,
  type MadeStep,
  type Making,
  madeExecutors,
  madeFields,
  readBack,
  removalStep,
  toCreate,
} from "./made-objects.ts";
import { declaredElsewhere, takenOver } from "./session.ts";

export const NetworkRecord = recordOf("network", madeFields);
export type NetworkRecord = z.infer<typeof NetworkRecord>;

/** The network applier's steps, keyed by action: a volume's, and a recreate. */
export type NetworkStep =
  | MadeStep<NetworkRecord, NetworkResource>
  | StepOf<"recreate", Making<NetworkRecord, NetworkResource>>;

const step = stepsOf<NetworkStep>("network");

/** One executor per action of NetworkStep, over one runtime finder. */
function networkExecutors(finder: RuntimeFinder): Executors<NetworkStep, NetworkResource, NetworkRecord> {
  return {
    ...madeExecutors("network", finder),
    create: (st, _w, record, ctx) => create(st, st.data.wanted, record, ctx, finder, false),
    recreate: (st, _w, record, ctx) => create(st, st.data.wanted, record, ctx, finder, true),
  };
}

/** How the found network differs from the declared one, one phrase each. */
function differences(w: NetworkResource, f: NetworkInfo): string[] {
  const subnets = f.subnets.map((s) => s.subnet).join(", ") || "none";
  return [
    f.driver !== w.driver ? `driver ${f.driver} → ${w.driver}` : "",
    w.subnet && !f.subnets.some((s) => s.subnet === w.subnet) ? `subnet ${subnets} → ${w.subnet}` : "",
    w.gateway && !f.subnets.some((s) => s.gateway === w.gateway) ? `gateway → ${w.gateway}` : "",
    f.internal !== w.internal ? `internal ${f.internal} → ${w.internal}` : "",
  ].filter(Boolean);
}

function createArgv(w: NetworkResource): string[] {
  return [
    "network",
    "create",
    "--driver",
    w.driver,
    ...(w.subnet ? ["--subnet", w.subnet] : []),
    ...(w.gateway ? ["--gateway", w.gateway] : []),
    ...(w.internal ? ["--internal"] : []),
    w.name,
  ];
}

export function networkApplier(
  finder: RuntimeFinder = machineRuntimes(),
): Applier<NetworkResource, NetworkRecord, NetworkStep> {
  return {
    type: "network",
    recordSchema: NetworkRecord,

    async decide(w, record, ctx) {
      const looked = await lookUp(step, "network", w, record, ctx, finder);
      if ("action" in looked) return looked;
      const { found, mine } = looked;
      const next: NetworkRecord = { ...looked.next };
      if (!found) return absentStep(step, w, mine, next);
      const diff = differences(w, found);
      if (!diff.length)
        return step(
          w.id,
          "unchanged",
          record ? "none" : "note",
          `${w.name} is as declared${mine ? "" : " (found, not the mesh's)"}`,
          next,
        );
      if (!mine)
        return step(
          w.id,
          "failed",
          "fail",
          `${w.name} exists as the mesh did not make it (${diff.join(", ")}); it is not replaced`,
        );
      return step(w.id, "updated", "recreate", `${w.name} recreated: ${diff.join(", ")}`, {
        next,
        wanted: w,
      });
    },

    async decideRemoval(id, record, ctx) {
      const by = declaredElsewhere(ctx, "network", record.name, id);
      if (by) return step(id, "unchanged", "forget", takenOver(record.name, by));
      if (!record.created)
        return step(id, "unchanged", "forget", `${record.name} left in place: the mesh did not create it`);
      return removalStep(
        step,
        "network",
        id,
        record,
        ctx,
        finder,
        `${record.name} removed (the mesh created it)`,
      );
    },

    execute: executeBy(networkExecutors(finder)),
  };
}

/** Made (after the one the mesh made before is taken down, for a recreate) and read back as declared. */
async function create(
  st: StepFor<NetworkStep, "create" | "recreate">,
  w: NetworkResource,
  record: NetworkRecord | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
  recreate: boolean,
): Promise<Executed<NetworkRecord>> {
  const made = toCreate("network", st.data.next, record, ctx, finder);
  if (isDone(made)) return made;
  const { rt, next } = made;
  let reattach: string[] = [];
  if (recreate) {
    const out = await recreateFirst(rt, w, ctx.declared ?? []);
    if (isError(out)) return { did: "failed", detail: out.error, record: next };
    reattach = out;
  }
  const created = await rt.must(createArgv(w));
  if (isError(created))
    return {
      did: "failed",
      detail: `${w.name} could not be created: ${created.error}`,
      record: record ?? null,
    };
  for (const c of reattach) await rt.run(["network", "connect", w.name, c]);
  const back = await readBack<NetworkInfo, NetworkRecord>(made, "network", w.name, (b) => differences(w, b));
  if (isDone(back)) return back;
  const sub = back.subnets.map((x) => x.subnet).join(", ");
  return {
    did: st.did,
    detail: `${st.detail}; read back ${back.driver}${sub ? ` ${sub}` : ""}`,
    record: next,
  };
}

/**
 * Before a network the mesh made is made again: every container on it is disconnected, and it is removed.
 * The ones this declaration does not put on it are given back afterwards (those it does are recreated).
 */
async function recreateFirst(
  rt: Runtime,
  w: NetworkResource,
  declared: readonly Resource[],
): Promise<string[] | { error: string }> {
  const listed = await rt.must([
    "container",
    "ls",
    "--all",
    "--filter",
    `network=${w.name}`,
    "--format",
    "{{.Names}}",
  ]);
  if (isError(listed)) return listed;
  const attached = listed
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  for (const c of attached) await rt.run(["network", "disconnect", "-f", w.name, c]);
  const removed = await rt.must(["network", "rm", w.name]);
  if (isError(removed)) return { error: `${w.name} could not be removed to be recreated: ${removed.error}` };
  const onIt = new Set(
    declared.flatMap((r) =>
      r.type === "container" && (r.networks ?? []).some((n) => n.name === w.name) ? [r.name] : [],
    ),
  );
  return attached.filter((c) => !onIt.has(c));
}
