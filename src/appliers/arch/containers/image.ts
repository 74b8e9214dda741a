// image: there by its reference (pulled when missing, always, or never), or loaded from a tarball a file
// resource wrote (loaded again when the tarball's content changes, then tagged as the declared reference);
// read back by the image's id. Undeclared, an image is left: a container outside the mesh may run it.

import { closeSync } from "node:fs";
import * as z from "zod";
import {
  isError,
  machineRuntimes,
  RUNTIME_PULL_TIMEOUT_MS,
  type Runtime,
  type RuntimeFinder,
  shortRef,
} from "../../../system/arch/index.ts";
import { openFileAt, readFileAt, sha256 } from "../../../system/index.ts";
import { type ImageResource, RuntimeKind } from "../../../vocabulary/index.ts";
import { executeBy, failsAgain, forgets, stepsOf } from "../../step.ts";
import {
  type Applier,
  type DecideContext,
  type Executed,
  type Executors,
  recordOf,
  type StepFor,
  type StepOf,
} from "../../types.ts";
import { sessionOf } from "./session.ts";

export const ImageRecord = recordOf("image", {
  ref: z.string(),
  runtime: RuntimeKind,
  /** The image's id when last read back. */
  image: z.string(),
  /** The content digest of the tarball it was loaded from. */
  loaded: z.string().optional(),
});
export type ImageRecord = z.infer<typeof ImageRecord>;

interface ImageData {
  /** The image it makes there, named in the step (balena-supervisor's `target`): its executor needs no `!`. */
  wanted: ImageResource;
  runtime: RuntimeKind;
  /** The tarball's digest, for a load (the tarball itself is opened again, with no link followed, to load). */
  loaded?: string;
  /** The id it had before a pull, to tell whether the pull changed it. */
  before?: string;
}

/** A load carries the tarball it loads from. */
type LoadData = ImageData & { load: string };

/** The image applier's steps, keyed by action: each executor below is handed its own. */
export type ImageStep =
  | StepOf<"load", LoadData>
  | StepOf<"pull", ImageData>
  | StepOf<"none" | "note", ImageData>
  | StepOf<"forget" | "fail" | "refuse">;

/** A step that ends with the image read back: loaded, pulled, or only looked at. */
type HereStep = StepFor<ImageStep, "load" | "pull" | "none" | "note">;

/** What makes the image there before it is read back: null when done, else why not. */
type Bring = (rt: Runtime, st: HereStep, ctx: DecideContext) => Promise<string | null>;

const step = stepsOf<ImageStep>("image");

/** One executor per action of ImageStep, over one runtime finder. */
function imageExecutors(finder: RuntimeFinder): Executors<ImageStep, ImageResource, ImageRecord> {
  return {
    load: (st, _w, record, ctx) =>
      bringThenReadBack(st, record, ctx, finder, (rt) => loadTarball(rt, st, ctx)),
    pull: (st, _w, record, ctx) => bringThenReadBack(st, record, ctx, finder, pullRef),
    none: (st, _w, record, ctx) => bringThenReadBack(st, record, ctx, finder, null),
    note: (st, _w, record, ctx) => bringThenReadBack(st, record, ctx, finder, null),
    forget: forgets,
    fail: failsAgain,
    refuse: failsAgain,
  };
}

export function imageApplier(
  finder: RuntimeFinder = machineRuntimes(),
): Applier<ImageResource, ImageRecord, ImageStep> {
  return {
    type: "image",
    recordSchema: ImageRecord,
    // a tarball loaded is read as the files before it left it
    traits: { readsChanges: (w) => w.load !== undefined },

    async decide(w, record, ctx) {
      const s = sessionOf(ctx, finder);
      const rt = s.runtime(w.runtime ?? record?.runtime);
      if (typeof rt === "string") return step(w.id, "failed", "refuse", rt, undefined, "runtime");
      const found = await s.ask(rt, "image", w.ref);
      if (isError(found)) return step(w.id, "failed", "fail", found.error);
      const base: ImageData = { wanted: w, runtime: rt.kind, before: found?.id };
      if (w.load) {
        const wrote = ctx.wrote?.(w.load);
        // read with no link followed, like every declared path the host reads
        const read = wrote ? null : await readFileAt(ctx.ports.root, w.load);
        const loaded = wrote ?? (read && typeof read === "object" ? sha256(read.bytes) : undefined);
        if (!loaded && !ctx.made.has(w.load))
          return step(w.id, "failed", "refuse", `${w.load} does not exist`, undefined, "load");
        const data = { ...base, loaded, load: w.load };
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

    execute: executeBy(imageExecutors(finder)),
  };
}

/** The tarball handed over as an fd opened with no link followed, never as a name the runtime would resolve itself. */
async function loadTarball(
  rt: Runtime,
  st: StepFor<ImageStep, "load">,
  ctx: DecideContext,
): Promise<string | null> {
  const { wanted: w, load } = st.data;
  const fd = openFileAt(ctx.ports.root, load);
  if (typeof fd !== "number") return fd ?? `${load} does not exist`;
  const input = ["image", "load", "--input", "/dev/fd/3"];
  const out = await rt.must(input, RUNTIME_PULL_TIMEOUT_MS, [fd]).finally(() => closeSync(fd));
  if (isError(out)) return `${w.ref} could not be loaded: ${out.error}`;
  const loaded = /Loaded image(?: ID)?(?:\(s\))?: *(\S+)/.exec(out)?.[1];
  if (!loaded || shortRef(loaded) === shortRef(w.ref)) return null;
  const tag = await rt.must(["image", "tag", loaded, w.ref]);
  return isError(tag)
    ? `${w.ref}: the tarball held ${loaded}, which could not be tagged: ${tag.error}`
    : null;
}

async function pullRef(rt: Runtime, st: HereStep): Promise<string | null> {
  const w = st.data.wanted;
  const out = await rt.must(["image", "pull", w.ref], RUNTIME_PULL_TIMEOUT_MS);
  return isError(out) ? `${w.ref} could not be pulled: ${out.error}` : null;
}

/** `bring` the image (a load or a pull; nothing to look only), then read it back by its reference. */
async function bringThenReadBack(
  st: HereStep,
  record: ImageRecord | undefined,
  ctx: DecideContext,
  finder: RuntimeFinder,
  bring: Bring | null,
): Promise<Executed<ImageRecord>> {
  const { data } = st;
  const w = data.wanted;
  const s = sessionOf(ctx, finder);
  const rt = s.runtime(data.runtime ?? record?.runtime);
  const fail = (detail: string) => ({ did: "failed" as const, detail, record: record ?? null });
  if (typeof rt === "string") return fail(rt);
  const why = bring && (await bring(rt, st, ctx));
  if (why) return fail(why);
  if (bring) s.forget(rt, "image", w.ref);
  const back = await s.ask(rt, "image", w.ref);
  if (isError(back) || !back) return fail(`${w.ref} read back: ${isError(back) ? back.error : "not there"}`);
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
}
