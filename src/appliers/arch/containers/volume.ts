// volume: made as declared, read back by `volume inspect`; never recreated (its data would go with it);
// undeclared, removed only when the mesh made it and the declaration said `remove_data: true`, else kept and said.

import * as z from "zod";
import { isError, machineRuntimes, type RuntimeFinder, type VolumeInfo } from "../../../system/arch/index.ts";
import type { VolumeResource } from "../../../vocabulary/index.ts";
import { executeBy, stepsOf } from "../../step.ts";
import {
  type Applier,
  type DecideContext,
  type Executed,
  type Executors,
  recordOf,
  type StepFor,
} from "../../types.ts";
import {
  absentStep,
  isDone,
  lookUp,
  type MadeStep,
  madeExecutors,
  madeFields,
  readBack,
  removalStep,
  toCreate,
} from "./made-objects.ts";
import { declaredElsewhere, takenOver } from "./session.ts";

export const VolumeRecord = recordOf("volume", {
  ...madeFields,
  /** What the last declaration said: undeclared, the data goes only when this was true. */
  remove_data: z.boolean(),
});
export type VolumeRecord = z.infer<typeof VolumeRecord>;

/** The volume applier's steps, keyed by action: a volume is never recreated. */
export type VolumeStep = MadeStep<VolumeRecord, VolumeResource>;

const step = stepsOf<VolumeStep>("volume");

/** One executor per action of VolumeStep, over one runtime finder. */
function volumeExecutors(finder: RuntimeFinder): Executors<VolumeStep, VolumeResource, VolumeRecord> {
  return {
    ...madeExecutors("volume", finder),
    create: (st, _w, record, ctx) => create(st, st.data.wanted, record, ctx, finder),
  };
}

function differences(w: VolumeResource, f: VolumeInfo): string[] {
  const labels = Object.entries(w.labels ?? {}).filter(([k, v]) => f.labels[k] !== v);
  return [
    f.driver !== w.driver ? `driver ${f.driver} → ${w.driver}` : "",
    labels.length ? `labels ${labels.map(([k]) => k).join(", ")}` : "",
  ].filter(Boolean);
}

export function volumeApplier(
  finder: RuntimeFinder = machineRuntimes(),
): Applier<VolumeResource, VolumeRecord, VolumeStep> {
  return {
    type: "volume",
    recordSchema: VolumeRecord,

    async decide(w, record, ctx) {
      const looked = await lookUp(step, "volume", w, record, ctx, finder);
      if ("action" in looked) return looked;
      const { found, mine } = looked;
      const next: VolumeRecord = { ...looked.next, remove_data: w.remove_data };
      if (!found) return absentStep(step, w, mine, next);
      const diff = differences(w, found);
      if (diff.length)
        return step(
          w.id,
          "failed",
          "fail",
          `${w.name} differs (${diff.join(", ")}); a volume is never recreated: its data would be lost`,
        );
      const changed = record && record.remove_data !== w.remove_data;
      return step(
        w.id,
        "unchanged",
        record && !changed ? "none" : "note",
        `${w.name} is as declared${mine ? "" : " (found, not the mesh's)"}`,
        next,
      );
    },

    async decideRemoval(id, record, ctx) {
      const by = declaredElsewhere(ctx, "volume", record.name, id);
      if (by) return step(id, "unchanged", "forget", takenOver(record.name, by));
      if (!record.created)
        return step(id, "unchanged", "forget", `${record.name} left in place: the mesh did not create it`);
      if (!record.remove_data)
        return step(
          id,
          "unchanged",
          "forget",
          `${record.name} kept with its data: the declaration did not say remove_data: true`,
        );
      return removalStep(
        step,
        "volume",
        id,
        record,
        ctx,
        finder,
        `${record.name} removed with its data (remove_data: true)`,
      );
    },

    execute: executeBy(volumeExecutors(finder)),
  };
}

/** Made as declared and read back. */
async function create(
  st: StepFor<VolumeStep, "create">,
  w: VolumeResource,
  record: VolumeRecord | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
): Promise<Executed<VolumeRecord>> {
  const made = toCreate("volume", st.data.next, record, ctx, finder);
  if (isDone(made)) return made;
  const labels = Object.entries(w.labels ?? {}).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
  const created = await made.rt.must(["volume", "create", "--driver", w.driver, ...labels, w.name]);
  if (isError(created))
    return {
      did: "failed",
      detail: `${w.name} could not be created: ${created.error}`,
      record: record ?? null,
    };
  const back = await readBack<VolumeInfo, VolumeRecord>(made, "volume", w.name, (b) => differences(w, b));
  if (isDone(back)) return back;
  return { did: st.did, detail: `${st.detail}; read back ${back.driver}`, record: made.next };
}
