// image: there by its reference (pulled when missing, always, or never), or loaded from a tarball a file
// resource wrote (loaded again when the tarball's content changes, then tagged as the declared reference);
// read back by the image's id. Undeclared, an image is left: a container outside the mesh may run it.

import { createHash } from "node:crypto";
import { closeSync } from "node:fs";
import {
  isError,
  machineRuntimes,
  RUNTIME_PULL_TIMEOUT_MS,
  type RuntimeFinder,
  shortRef,
} from "../../../system/arch/index.ts";
import { openFileAt, readFileAt } from "../../../system/index.ts";
import type { ImageResource, RuntimeKind } from "../../../vocabulary/index.ts";
import { stepsOf } from "../../step.ts";
import type { Applier, Executed, RecordBase } from "../../types.ts";
import { sessionOf } from "./session.ts";

export interface ImageRecord extends RecordBase {
  type: "image";
  ref: string;
  runtime: RuntimeKind;
  /** The image's id when last read back. */
  image: string;
  /** The content digest of the tarball it was loaded from. */
  loaded?: string;
}

const step = stepsOf("image");

interface ImageData {
  runtime: RuntimeKind;
  /** The tarball's digest, for a load (the tarball itself is opened again, with no link followed, to load). */
  loaded?: string;
  /** The id it had before a pull, to tell whether the pull changed it. */
  before?: string;
}

export function imageApplier(finder: RuntimeFinder = machineRuntimes()): Applier<ImageResource, ImageRecord> {
  return {
    type: "image",
    // a tarball loaded is read as the files before it left it
    traits: { readsChanges: (w) => w.load !== undefined },

    async decide(w, record, ctx) {
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(w.runtime ?? record?.runtime);
      if (typeof rt === "string") return step(w.id, "failed", "refuse", rt, undefined, "runtime");
      const found = await s.ask(rt, "image", w.ref);
      if (isError(found)) return step(w.id, "failed", "fail", found.error);
      const base: ImageData = { runtime: rt.kind, before: found?.id };
      if (w.load) {
        const wrote = ctx.wrote?.(w.load);
        // read with no link followed, like every declared path the host reads
        const read = wrote ? null : await readFileAt(ctx.ports.root, w.load);
        const loaded =
          wrote ??
          (read && typeof read === "object"
            ? createHash("sha256").update(read.bytes).digest("hex")
            : undefined);
        if (!loaded && !ctx.made.has(w.load))
          return step(w.id, "failed", "refuse", `${w.load} does not exist`, undefined, "load");
        const data = { ...base, loaded };
        if (!found) return step(w.id, "created", "load", `${w.ref} loaded from ${w.load}`, data);
        if (record?.loaded !== loaded)
          return step(w.id, "updated", "load", `${w.ref} loaded again: ${w.load} changed`, data);
        return step(w.id, "unchanged", "none", `${w.ref} is loaded from ${w.load} as it stands`, data);
      }
      const pull = w.pull ?? "missing";
      if (!found && pull === "never")
        return step(w.id, "failed", "fail", `${w.ref} is not here, and pull is never`);
      if (!found) return step(w.id, "created", "pull", `${w.ref} pulled`, base);
      if (pull === "always")
        return step(
          w.id,
          "unchanged",
          "pull",
          `${w.ref} pulled again; check: the registry says whether it changed`,
          base,
        );
      return step(
        w.id,
        "unchanged",
        record ? "none" : "note",
        `${w.ref} is here (${found.id.slice(0, 12)})`,
        base,
      );
    },

    async decideRemoval(id, record) {
      return step(
        id,
        "unchanged",
        "forget",
        `${record.ref} left in place: an image is not removed (something else may run it)`,
      );
    },

    async execute(st, w, record, ctx): Promise<Executed<ImageRecord>> {
      if (st.action === "forget") return { did: st.did, detail: st.detail, record: null };
      const data = st.data as ImageData | undefined;
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(data?.runtime ?? record?.runtime);
      if (!w || !data || st.action === "fail" || st.action === "refuse" || typeof rt === "string")
        return { did: "failed", detail: typeof rt === "string" ? rt : st.detail, record: record ?? null };
      if (st.action === "load") {
        // handed over as an fd opened with no link followed, never as a name the runtime would resolve itself
        const fd = openFileAt(ctx.ports.root, w.load!);
        if (typeof fd !== "number")
          return { did: "failed", detail: fd ?? `${w.load} does not exist`, record: record ?? null };
        const input = ["image", "load", "--input", "/dev/fd/3"];
        const out = await rt.must(input, RUNTIME_PULL_TIMEOUT_MS, [fd]).finally(() => closeSync(fd));
        if (isError(out))
          return {
            did: "failed",
            detail: `${w.ref} could not be loaded: ${out.error}`,
            record: record ?? null,
          };
        const loaded = /Loaded image(?: ID)?(?:\(s\))?: *(\S+)/.exec(out)?.[1];
        if (loaded && shortRef(loaded) !== shortRef(w.ref)) {
          const tag = await rt.must(["image", "tag", loaded, w.ref]);
          if (isError(tag))
            return {
              did: "failed",
              detail: `${w.ref}: the tarball held ${loaded}, which could not be tagged: ${tag.error}`,
              record: record ?? null,
            };
        }
      }
      if (st.action === "pull") {
        const out = await rt.must(["image", "pull", w.ref], RUNTIME_PULL_TIMEOUT_MS);
        if (isError(out))
          return {
            did: "failed",
            detail: `${w.ref} could not be pulled: ${out.error}`,
            record: record ?? null,
          };
      }
      if (st.action !== "none" && st.action !== "note") s.forget(rt, "image", w.ref);
      const back = await s.ask(rt, "image", w.ref);
      if (isError(back) || !back)
        return {
          did: "failed",
          detail: `${w.ref} read back: ${isError(back) ? back.error : "not there"}`,
          record: record ?? null,
        };
      const next: ImageRecord = {
        type: "image",
        ref: w.ref,
        runtime: rt.kind,
        image: back.id,
        loaded: data.loaded,
      };
      // a pull the plan could not judge: what the registry gave says whether it changed
      const did =
        st.action === "pull" && data.before ? (data.before === back.id ? "unchanged" : "updated") : st.did;
      return { did, detail: `${st.detail}; read back ${back.id.slice(0, 12)}`, record: next };
    },
  };
}
