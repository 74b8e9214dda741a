// volume: made as declared, read back by `volume inspect`; never recreated (its data would go with it);
// undeclared, removed only when the mesh made it and the declaration said `remove_data: true`, else kept and said.

import type { RuntimeKind, VolumeResource } from "../vocabulary/index.ts";
import { isError, machineRuntimes, type RuntimeFinder, sessionOf, type VolumeInfo } from "./runtime.ts";
import { stepsOf } from "./step.ts";
import type { Applier, Executed, RecordBase } from "./types.ts";

export interface VolumeRecord extends RecordBase {
  type: "volume";
  name: string;
  runtime: RuntimeKind;
  created: boolean;
  /** What the last declaration said: undeclared, the data goes only when this was true. */
  remove_data: boolean;
}

const step = stepsOf("volume");

function differences(w: VolumeResource, f: VolumeInfo): string[] {
  const labels = Object.entries(w.labels ?? {}).filter(([k, v]) => f.labels[k] !== v);
  return [
    f.driver !== w.driver ? `driver ${f.driver} → ${w.driver}` : "",
    labels.length ? `labels ${labels.map(([k]) => k).join(", ")}` : "",
  ].filter(Boolean);
}

export function volumeApplier(
  finder: RuntimeFinder = machineRuntimes(),
): Applier<VolumeResource, VolumeRecord> {
  return {
    type: "volume",

    async decide(w, record, ctx) {
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(w.runtime ?? record?.runtime);
      if (typeof rt === "string") return step(w.id, "failed", "refuse", rt, undefined, "runtime");
      const found = await s.ask(rt, "volume", w.name);
      if (isError(found)) return step(w.id, "failed", "fail", found.error);
      const mine = record?.created === true;
      const next: VolumeRecord = {
        type: "volume",
        name: w.name,
        runtime: rt.kind,
        created: mine || !found,
        remove_data: w.remove_data,
      };
      if (!found)
        return step(
          w.id,
          mine ? "repaired" : "created",
          "create",
          `${w.name} ${mine ? "created again: it was gone" : "created"}`,
          next,
        );
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
      if (!record.created)
        return step(id, "unchanged", "forget", `${record.name} left in place: the mesh did not create it`);
      if (!record.remove_data)
        return step(
          id,
          "unchanged",
          "forget",
          `${record.name} kept with its data: the declaration did not say remove_data: true`,
        );
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(record.runtime);
      if (typeof rt === "string") return step(id, "failed", "fail", rt);
      const found = await s.ask(rt, "volume", record.name);
      if (isError(found)) return step(id, "failed", "fail", found.error);
      if (!found) return step(id, "removed", "forget", `${record.name} was already gone`);
      return step(id, "removed", "remove", `${record.name} removed with its data (remove_data: true)`);
    },

    async execute(st, w, record, ctx): Promise<Executed<VolumeRecord>> {
      const next = (st.data as VolumeRecord | undefined) ?? record ?? null;
      if (st.action === "none" || st.action === "note")
        return { did: st.did, detail: st.detail, record: next };
      if (st.action === "forget") return { did: st.did, detail: st.detail, record: null };
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(next?.runtime);
      if (st.action === "fail" || st.action === "refuse" || typeof rt === "string" || !next)
        return { did: "failed", detail: typeof rt === "string" ? rt : st.detail, record: record ?? null };
      s.forget(rt, "volume", next.name);
      if (st.action === "remove") {
        const r = await rt.must(["volume", "rm", next.name]);
        if (isError(r))
          return { did: "failed", detail: `${next.name} could not be removed: ${r.error}`, record: next };
        return { did: "removed", detail: st.detail, record: null };
      }
      const labels = Object.entries(w!.labels ?? {}).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
      const made = await rt.must(["volume", "create", "--driver", w!.driver, ...labels, w!.name]);
      if (isError(made))
        return {
          did: "failed",
          detail: `${w!.name} could not be created: ${made.error}`,
          record: record ?? null,
        };
      const back = await s.ask(rt, "volume", w!.name);
      if (isError(back) || !back)
        return {
          did: "failed",
          detail: `${w!.name} read back: ${isError(back) ? back.error : "not there"}`,
          record: next,
        };
      const diff = differences(w!, back);
      if (diff.length)
        return {
          did: "failed",
          detail: `${w!.name} read back differently: ${diff.join(", ")}`,
          record: next,
        };
      return { did: st.did, detail: `${st.detail}; read back ${back.driver}`, record: next };
    },
  };
}
