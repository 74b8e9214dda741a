// overlay (overlay.md, ADR 0105): the node's WireGuard interface, written 0600 with the node's overlay key and run
// by wg-quick@<if>; read back from `wg show <if> dump` and the kernel's MTU. When it `takes` a found tunnel the
// takeover is takeover.ts's and the found configuration's retirement retire.ts's; what both
// remember across runs is ledger.ts's. Removal gives back what was found, a retired tunnel excepted.

import * as z from "zod";
import { SECRET_FILE_MODE } from "../../../defaults.ts";
import {
  bringDown,
  bringUp,
  describeLive,
  type FoundFile,
  type Init,
  liveDifference,
  putBack,
  readBack,
  readRegular,
  removeRegular,
  unitEnabled,
  unitRunning,
  waitGone,
  writeConfig,
  writeRegular,
} from "../../../system/arch/index.ts";
import type { OverlayResource } from "../../../vocabulary/index.ts";
import { executeBy, failsAgain, stepsOf } from "../../step.ts";
import {
  type Applier,
  type DecideContext,
  type Executed,
  type Executors,
  recordOf,
  type StepOf,
} from "../../types.ts";
import { noteTakeover, retiredTunnels, Takeover } from "./ledger.ts";
import { type RetireData, retire } from "./retire.ts";
import { initOf, overlayKeyOf, overlayStateOf, runner, type Survey, survey } from "./survey.ts";
import { decideTakes, facts, type TakeData, takeOver } from "./takeover.ts";

export {
  type Account,
  type FoundRun,
  type Retired,
  retiredTunnels,
  type Takeover,
  takeovers,
} from "./ledger.ts";
export { type OverlayPorts, overlayKeyOf } from "./survey.ts";
export { accountLine, facts } from "./takeover.ts";

/** The overlay's record: the apply parses one from disk with it before any decision, as every kind's. */
export const OverlayRecord = recordOf("overlay", {
  interface: z.string(),
  path: z.string(),
  /** True when the mesh made the config; false when a file was found at its path (and its original held). */
  created: z.boolean(),
  /** SHA-256 of the config last written: it carries a key, so never its content. */
  wrote: z.string(),
  /** How its unit (or, without systemd, its interface) was found: what giving it back restores. */
  found: Takeover.shape.found,
  /** The found tunnel it took over: the same account the store's takeover journal keeps. */
  takeover: Takeover.optional(),
});
export type OverlayRecord = z.infer<typeof OverlayRecord>;

/** The interfaces the mesh runs here, from the records: never a found tunnel to take. */
export function meshInterfaces(records: Record<string, { type: string; [k: string]: unknown }>): Set<string> {
  return new Set(
    Object.values(records).flatMap((r) =>
      r.type === "overlay" && typeof r.interface === "string" ? [r.interface] : [],
    ),
  );
}

interface WriteData {
  bytes: Uint8Array;
  sha: string;
  hold?: FoundFile;
}

interface ApplyData {
  systemd: boolean;
  write?: WriteData;
  bring: "none" | "start" | "restart";
  take?: TakeData;
  retire?: RetireData;
  notes: string[];
  record: OverlayRecord;
  /** The overlay as declared: carried in the step, so its executor is handed it, never looks it up. */
  wanted: OverlayResource;
}

interface RemoveData {
  systemd: boolean;
  /** The tunnel it took was retired: nothing of it is written back. */
  retired: boolean;
  /** The record it gives back: carried in the step, as the apply's decision saw it. */
  record: OverlayRecord;
}

/** The overlay applier's steps, keyed by action: each executor below is handed its own. */
export type OverlayStep =
  | StepOf<"none", ApplyData>
  | StepOf<"apply", ApplyData>
  | StepOf<"remove", RemoveData>
  | StepOf<"refuse">;

const stepOf = stepsOf<OverlayStep>("overlay");

const refuse = (id: string, detail: string, field = "interface") =>
  stepOf(id, "failed", "refuse", detail, undefined, field);

/** Why the interface running now is not the declared one, or null. */
function runningDifference(wanted: OverlayResource, s: Survey): string | null {
  if (s.live.kind === "absent") return "is not up";
  if (s.live.kind === "other") return "exists and is not a WireGuard interface";
  if (s.live.kind === "unknown") return s.live.reason;
  const diff = liveDifference(wanted, s.key.public, s.live.dump);
  if (diff) return diff;
  if (wanted.mtu !== undefined && s.mtu !== wanted.mtu) return `runs at MTU ${s.mtu}, not ${wanted.mtu}`;
  if (s.unit && !unitEnabled(s.unit))
    return `is not started at boot (wg-quick@${wanted.interface} is ${s.unit.file || "not enabled"})`;
  return null;
}

/** The record this id will have once applied: what was found is kept from the first apply on. */
function nextRecordOf(wanted: OverlayResource, record: OverlayRecord | undefined, s: Survey): OverlayRecord {
  return {
    type: "overlay",
    interface: wanted.interface,
    path: s.path,
    // no record, yet exactly what the mesh would write (the node's key in it): a crash's leftover, the mesh's
    created: record ? record.created : s.file === null || s.file.sha === s.sha,
    wrote: s.sha,
    found: record?.found ?? {
      enabled: s.unit ? unitEnabled(s.unit) : false,
      running: s.unit ? unitRunning(s.unit) : s.live.kind === "up",
    },
    ...(record?.takeover ? { takeover: record.takeover } : {}),
  };
}

/** What a takeover (or a retirement) adds to the apply, or the refusal of it; nothing without `takes`. */
async function takesOf(
  wanted: OverlayResource,
  record: OverlayRecord | undefined,
  s: Survey,
  ctx: DecideContext,
): Promise<Awaited<ReturnType<typeof decideTakes>>> {
  if (!wanted.takes) return { kind: "ok", notes: [] };
  return decideTakes(wanted, record, s, ctx);
}

/** The apply step: what it takes over, writes, brings up and retires, in the order it does them. */
function applyStepOf(
  wanted: OverlayResource,
  record: OverlayRecord | undefined,
  s: Survey,
  data: ApplyData,
  diff: string | null,
): OverlayStep {
  const { take, write, bring, retire, notes } = data;
  const did = !record ? "created" : record.wrote === s.sha && !take && !retire ? "repaired" : "updated";
  const what: string[] = [];
  if (take) what.push(`take over ${take.takeover.interface} (${facts(take.takeover)})`);
  if (write) what.push(`write ${s.path} (0600)${write.hold && !record ? ", the file found there held" : ""}`);
  if (bring !== "none" && !take)
    what.push(`${bring} ${runner(s.init, wanted.interface)}${diff ? ` (${diff})` : ""}`);
  if (retire) what.push(`retire ${retire.path}`);
  return stepOf(
    wanted.id,
    did,
    "apply",
    [`${wanted.interface}: ${what.join(", ")}`, ...notes].join("; "),
    data,
  );
}

/** One executor per action of OverlayStep. */
const executors: Executors<OverlayStep, OverlayResource, OverlayRecord> = {
  none: async (step) => ({ did: "unchanged", detail: step.detail, record: step.data.record }),
  apply: async (step, _wanted, _record, ctx) => applyStep(step, step.data.wanted, ctx),
  remove: async (step, _wanted, _record, ctx) => removeStep(step, step.data.record, ctx),
  refuse: failsAgain,
};

export const overlayApplier: Applier<OverlayResource, OverlayRecord, OverlayStep> = {
  type: "overlay",
  recordSchema: OverlayRecord,
  traits: {
    pathOf: (record) => record.path,
    // a found configuration taken over is held at its own path
    originalsAt: (record) => (record.takeover ? [record.path, record.takeover.path] : [record.path]),
  },

  async decide(wanted, record, ctx) {
    if (record && record.interface !== wanted.interface)
      return refuse(
        wanted.id,
        `was ${record.interface} and is now ${wanted.interface}: a new interface name is a new overlay (declare it under a new id)`,
      );
    const s = await survey(wanted, ctx);
    if (typeof s === "string") return refuse(wanted.id, s);
    const t = await takesOf(wanted, record, s, ctx);
    if (t.kind === "refuse") return refuse(wanted.id, t.detail, t.field);
    const { take, retire, notes } = t;
    const fileRight = s.file !== null && s.file.sha === s.sha && s.file.mode === SECRET_FILE_MODE;
    const hold = s.file && !record?.created && s.file.sha !== record?.wrote ? s.file : undefined;
    const write = fileRight ? undefined : { bytes: s.bytes, sha: s.sha, hold };
    const diff = runningDifference(wanted, s);
    const isUp = s.live.kind === "up" || (s.unit !== null && unitRunning(s.unit));
    const bring = write || diff ? (isUp ? "restart" : "start") : "none";
    const next = nextRecordOf(wanted, record, s);
    const data: ApplyData = {
      systemd: s.init.systemd,
      write,
      bring,
      take,
      retire,
      notes,
      record: next,
      wanted,
    };
    if (!take && !write && bring === "none" && !retire)
      return stepOf(
        wanted.id,
        "unchanged",
        "none",
        [`${wanted.interface} is as declared`, ...notes].join("; "),
        data,
      );
    return applyStepOf(wanted, record, s, data, diff);
  },

  async decideRemoval(id, record, ctx) {
    const init = await initOf(ctx);
    const retired = record.takeover
      ? retiredTunnels(overlayStateOf(ctx))[record.takeover.interface]
      : undefined;
    const parts = [`${record.interface}: ${runner(init, record.interface)} down`];
    parts.push(record.created ? `${record.path} removed` : `${record.path} given back its original`);
    const t = record.takeover;
    if (t && retired)
      parts.push(`${t.interface} was retired at ${retired.at}: nothing of it is written back`);
    else if (t && t.state !== "not taken")
      parts.push(`${t.interface} given back (${runner(init, t.interface)} as found)`);
    return stepOf(id, "removed", "remove", parts.join("; "), {
      systemd: init.systemd,
      retired: Boolean(retired),
      record,
    });
  },

  execute: executeBy(executors),
};

// ---- execution

async function applyStep(
  step: StepOf<"apply", ApplyData>,
  wanted: OverlayResource,
  ctx: DecideContext,
): Promise<Executed<OverlayRecord>> {
  const d = step.data;
  const init: Init = { systemd: d.systemd, exec: ctx.ports.exec };
  const key = overlayKeyOf(overlayStateOf(ctx));
  if (typeof key === "string") return { did: "failed", detail: key, record: null };
  let record = d.record;
  const said: string[] = [];
  // a failure still says the decision's notes: why a found configuration was kept (wg not answering, say)
  const failed = (why: string): Executed<OverlayRecord> => ({
    did: "failed",
    detail: [why, ...d.notes].join("; "),
    record,
  });
  if (d.write?.hold) await ctx.ports.originals.keep(record.path, d.write.hold.bytes, d.write.hold, true);
  if (d.take) {
    const taken = await takeOver({ ...d, take: d.take }, wanted, key, init, ctx);
    record = { ...record, takeover: taken.takeover };
    if (!taken.ok) return { did: "failed", detail: taken.said, record };
    said.push(taken.said);
  } else {
    if (d.write) await writeConfig(ctx.ports.root, record.path, d.write.bytes);
    if (d.bring !== "none") {
      const e = await bringUp(init, wanted.interface, d.bring === "restart");
      if (e) return failed(`${wanted.interface} did not start: ${e}`);
    }
    const back = await readBack(init.exec, wanted, key.public);
    if (back) return failed(`read back: ${back}`);
  }
  if (d.retire && record.takeover) {
    const r = await retire(d.retire, record.takeover, wanted, ctx);
    said.push(r.said);
    if (r.at) {
      const takeover = { ...record.takeover, retired: r.at };
      record = { ...record, takeover };
      noteTakeover(overlayStateOf(ctx), takeover);
    }
  }
  const detail = [
    step.detail.split("; ")[0],
    ...said,
    ...d.notes,
    await describeLive(init.exec, wanted.interface),
  ].join("; ");
  return { did: step.did, detail, record };
}
async function removeStep(
  step: StepOf<"remove", RemoveData>,
  record: OverlayRecord,
  ctx: DecideContext,
): Promise<Executed<OverlayRecord>> {
  const { systemd, retired } = step.data;
  const init: Init = { systemd, exec: ctx.ports.exec };
  const fail = (why: string) => ({ did: "failed" as const, detail: why, record });
  const down = await bringDown(init, record.interface, true);
  if (down) return fail(`${record.interface} could not be brought down: ${down}`);
  if (!(await waitGone(init.exec, record.interface)))
    return fail(`${record.interface} is still up after ${runner(init, record.interface)} down`);
  const said = [`${record.interface} down`];
  said.push(await giveBackConfig(record.path, record.created, record.wrote, ctx));
  if (!record.created) {
    const back = await putBack(init, record.interface, record.found);
    if (back) said.push(`${record.interface} could not be started again as found: ${back}`);
  }
  const t = record.takeover;
  if (t && retired) said.push(`${t.interface} was retired: nothing of it is written back`);
  else if (t) {
    if (t.kept && t.state !== "not taken") said.push(await giveBackConfig(t.path, false, "", ctx));
    else if (t.kept) await ctx.ports.originals.release(t.path);
    if (t.state !== "not taken") {
      const back = await putBack(init, t.interface, t.found);
      said.push(
        back ? `${t.interface} could not be given back: ${back}` : `${t.interface} given back as found`,
      );
    }
  }
  // given back or retired, the takeover is over: a later declaration that takes it again starts afresh
  if (t && !retired) noteTakeover(overlayStateOf(ctx), { interface: t.interface, forget: true });
  return { did: "removed", detail: said.join("; "), record: null };
}

/** The config the mesh created is removed (unless changed by hand); a found one is given its original back. */
async function giveBackConfig(
  path: string,
  created: boolean,
  wrote: string,
  ctx: DecideContext,
): Promise<string> {
  const { root, originals } = ctx.ports;
  const found = await readRegular(root, path);
  if (typeof found === "string") return `${path} left: ${found}`;
  if (created) {
    if (!found) return `${path} was already gone`;
    if (found.sha !== wrote) return `${path} left in place: changed by hand since the mesh wrote it`;
    await removeRegular(root, path);
    return `${path} removed`;
  }
  const original = await originals.original(path);
  if (!original) return `${path}: no original is held to give back`;
  if (!found || found.sha !== original.sha) {
    const { mode, uid, gid } = original.meta;
    await writeRegular(root, path, original.bytes, mode, ctx.ports.rootless ? undefined : { uid, gid });
  }
  await originals.release(path);
  return `${path} given back its original`;
}
