// Giving a unit back when its service is undeclared: the service record (what the host found the first time it
// touched a unit), the plan of giving it back and its execution. The service applier's side, over the systemd
// driver (src/system/arch/systemd.ts), which knows no record.
import * as z from "zod";
import {
  isAbsent,
  isActive,
  isEnabled,
  readRegular,
  removeRegular,
  showUnit,
  systemctl,
  type UnitState,
  unitPath,
  writeRegular,
} from "../../system/arch/index.ts";
import { underRoot } from "../../system/index.ts";
import { leftAsFound, thrownLine } from "../step.ts";
import { type DecideContext, type Exec, recordOf, type Step } from "../types.ts";

/** What the host found the first time it touched a unit, one property at a time: kept, never overwritten. */
export const ServiceFound = z.looseObject({
  /** LoadState when first touched: "not-found" means the unit did not exist. */
  load: z.string(),
  /** UnitFileState the first time the mesh set `enabled`. */
  enabled: z.string().optional(),
  /** ActiveState the first time the mesh set `state`. */
  active: z.string().optional(),
});
export type ServiceFound = z.infer<typeof ServiceFound>;

export const ServiceRecord = recordOf("service", {
  unit: z.string(),
  /** Absent only in a record written before the host kept what it found: such a unit is left alone. */
  found: ServiceFound.optional(),
  /** The unit file the mesh wrote at /etc/systemd/system/<unit>; `created` when nothing was there before. */
  file: z.looseObject({ created: z.boolean(), wrote: z.string() }).optional(),
  /** What was declared last (content by digest): a change the declaration did not ask for is a repair. */
  declared: z
    .looseObject({
      enabled: z.boolean().optional(),
      state: z.enum(["running", "stopped"]).optional(),
      content: z.string().optional(),
    })
    .optional(),
  /** Found running on an adopted node and held: never touched, so nothing is owed back when undeclared. */
  held: z.literal(true).optional(),
});
export type ServiceRecord = z.infer<typeof ServiceRecord>;

export const foundLine = (f: ServiceFound) =>
  `found ${f.load}${f.enabled !== undefined ? `, ${f.enabled || "no file state"}` : ""}${f.active !== undefined ? `, ${f.active}` : ""}`;

/** How an undeclared unit is given back: what was found restored, what the mesh made removed. */
export interface GiveBack {
  unit: string;
  did: Step["did"];
  detail: string;
  /** Run while the mesh's file is still in place: its [Install] names the links `disable` removes. */
  before: string[];
  file?: "remove" | "restore";
  reload: boolean;
  /** Run once the original file is back: `enable` follows its [Install]. */
  after: string[];
  /** The unit is the mesh's own (it created its file over nothing): nothing of it may be left running. */
  owned: boolean;
  /** The unit was held, never touched: giving it back touches (and reads) nothing. */
  held?: true;
}

const PAST: Record<string, string> = {
  stop: "stopped",
  disable: "disabled",
  enable: "enabled again, as found",
};

/** Directories a package puts unit files in: a file the mesh created in /etc over one of these is an override. */
const VENDOR_DIRS = ["/usr/lib/systemd/system", "/lib/systemd/system"];

/**
 * Looked up by name on purpose: /lib is a link to usr/lib on most machines, and this only asks whether a package
 * ships the unit (nothing is written or removed there), so the no-follow walk would only misread it as absent.
 */
async function hasVendorFile(root: string, unit: string): Promise<boolean> {
  for (const dir of VENDOR_DIRS)
    if (
      // node:fs/promises at this first use, not at every start (src/durable/write.ts says why)
      await process
        .getBuiltinModule("node:fs/promises")
        .lstat(underRoot(root, `${dir}/${unit}`))
        .then(
          () => true,
          () => false,
        )
    )
      return true;
  return false;
}

/** Read only: what giving `record`'s unit back takes, or why the unit cannot be read. */
export async function planGiveBack(
  _id: string,
  record: ServiceRecord,
  ctx: DecideContext,
): Promise<GiveBack | string> {
  const { unit } = record;
  if (record.held)
    return {
      ...nothingOf(unit),
      did: "unchanged",
      detail: leftAsFound(unit),
      held: true,
    };
  const now = await showUnit(ctx.ports.exec, unit);
  if (typeof now === "string") return now;
  // whatever its record says of what was found: a unit whose file the mesh created, over no vendor file, is the mesh's
  if (record.file?.created && !(await hasVendorFile(ctx.ports.root, unit)))
    return ownedGiveBack(unit, now, ctx);
  if (!record.found)
    return {
      ...nothingOf(unit),
      did: "unchanged",
      detail: `${unit} left alone: its record was written before the host kept what it found`,
    };
  return foundGiveBack(unit, record.found, record.file, now);
}

/** A give-back that runs nothing: the base every plan of one starts from. */
const nothingOf = (unit: string) => ({
  unit,
  before: [] as string[],
  after: [] as string[],
  reload: false,
  owned: false,
});

/** The mesh's own unit (it created its file): stopped, disabled and its file removed, nothing left running. */
async function ownedGiveBack(unit: string, now: UnitState, ctx: DecideContext): Promise<GiveBack> {
  const path = unitPath(unit);
  const file = await readRegular(ctx.ports.root, path);
  const before = [isActive(now.active) ? "stop" : "", isEnabled(now.file) ? "disable" : ""].filter(Boolean);
  const present = file !== null;
  const said = [...before.map((v) => PAST[v]), present ? `${path} removed` : `${path} was already gone`];
  return {
    ...nothingOf(unit),
    did: "removed",
    detail: `${unit} is the mesh's (it created the unit file): ${said.join(", ")}`,
    before,
    file: present ? "remove" : undefined,
    reload: present,
    owned: true,
  };
}

/** A unit the host found: put back as found, one property at a time, its file restored or the override removed. */
function foundGiveBack(
  unit: string,
  found: ServiceFound,
  recorded: ServiceRecord["file"],
  now: UnitState,
): GiveBack {
  const path = unitPath(unit);
  const before: string[] = [];
  const after: string[] = [];
  const said: string[] = [];
  if (found.active !== undefined && !isAbsent(now)) {
    if (!isActive(found.active) && isActive(now.active)) before.push("stop");
    else if (isActive(found.active) && !isActive(now.active))
      said.push("left stopped: nothing is started on the way out");
    else said.push(isActive(now.active) ? "left running, as found" : "left stopped, as found");
  }
  if (found.enabled !== undefined && !isAbsent(now)) {
    if (!isEnabled(found.enabled) && isEnabled(now.file)) before.push("disable");
    else if (isEnabled(found.enabled) && now.file === "disabled") after.push("enable");
  }
  const file = recorded ? (recorded.created ? "remove" : "restore") : undefined;
  const fileSaid =
    file === "remove"
      ? `${path} removed (the mesh's override)`
      : file === "restore"
        ? `${path} given back its original`
        : "";
  const all = [...before.map((v) => PAST[v]), fileSaid, ...after.map((v) => PAST[v]), ...said].filter(
    Boolean,
  );
  const did = before.length || after.length || file ? "restored" : "unchanged";
  const what =
    isAbsent(now) && !file
      ? "is not installed any more; nothing to give back"
      : all.length
        ? all.join(", ")
        : "as found";
  const detail = `${unit} ${foundLine(found)}: ${what}`;
  return { ...nothingOf(unit), did, detail, before, after, file, reload: file !== undefined };
}

/** Carry out a give-back and read the unit back; `ok: false` keeps the record, so the next apply tries again. */
export async function giveBack(plan: GiveBack, ctx: DecideContext): Promise<{ ok: boolean; detail: string }> {
  const { exec, root, originals } = ctx.ports;
  const { unit } = plan;
  const path = unitPath(unit);
  const fail = (why: string) => ({ ok: false, detail: `${unit}: giving back failed: ${why}` });
  if (plan.held) return { ok: true, detail: plan.detail };
  try {
    for (const verb of plan.before) {
      const why = await systemctl(exec, verb, "--", unit);
      if (why) return fail(why);
    }
    if (plan.file === "remove") await removeRegular(root, path);
    if (plan.file === "restore") {
      const original = await originals.original(path);
      if (!original) return fail(`no original of ${path} is held`);
      await writeRegular(
        root,
        path,
        original.bytes,
        original.meta.mode,
        ctx.ports.rootless ? undefined : original.meta,
      );
      await originals.release(path);
    }
    const back = await reloadRunShow(exec, unit, plan.reload, plan.after);
    if (typeof back === "string") return fail(back);
    const wrong =
      (plan.owned || plan.before.includes("stop")) && isActive(back.active)
        ? `ActiveState=${back.active}`
        : plan.before.includes("disable") && isEnabled(back.file)
          ? `UnitFileState=${back.file}`
          : plan.after.includes("enable") && !isEnabled(back.file)
            ? `UnitFileState=${back.file}`
            : null;
    if (wrong) return fail(`read back ${wrong}`);
    return {
      ok: true,
      detail: `${plan.detail}; read back ${back.load}, ${back.file || "no file state"}, ${back.active}`,
    };
  } catch (e) {
    return fail(thrownLine(e));
  }
}

/**
 * A daemon-reload when `reload` (so the unit is read as it is now on disk), then each verb on `unit`, then the unit
 * as systemd has it afterwards: or why not.
 */
export async function reloadRunShow(
  exec: Exec,
  unit: string,
  reload: boolean,
  verbs: readonly string[],
): Promise<UnitState | string> {
  if (reload) {
    const why = await systemctl(exec, "daemon-reload");
    if (why) return why;
  }
  for (const verb of verbs) {
    const why = await systemctl(exec, verb, "--", unit);
    if (why) return why;
  }
  return showUnit(exec, unit);
}
