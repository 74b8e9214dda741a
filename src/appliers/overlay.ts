// overlay (overlay.md, ADR 0105): the node's WireGuard interface, written 0600 with the node's overlay key and run
// by wg-quick@<if>; read back from `wg show <if> dump` and the kernel's MTU. When it `takes` a found tunnel, nothing
// is stopped until the declared interface would listen on the found port at the found address with the found
// key; the found configuration is held, its unit stopped and disabled, nothing flushed; a mesh interface that
// fails to start has the found one started again. Once a peer has handshaken with the mesh's interface, the
// found configuration is retired: removed from where its unit reads it, recorded apart from holds.

import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { SECRET_FILE_MODE, STATE_DIR_MODE } from "../defaults.ts";
import { keyPath, overlayKeyFromB64, privateB64, publicB64, State, writeFileAtomic } from "../store/index.ts";
import type { OverlayResource } from "../vocabulary/index.ts";
import { interfaceNameProblem } from "../vocabulary/overlay.ts";
import { sha256 } from "./file.ts";
import { placeProblem } from "./paths.ts";
import { stepsOf } from "./step.ts";
import { type FoundFile, readRegular, removeRegular, type UnitState, writeRegular } from "./systemd.ts";
import type { Applier, DecideContext, Executed, Ports, RecordBase, Step } from "./types.ts";
import {
  bringDown,
  bringUp,
  configPath,
  describeLive,
  hasSystemd,
  type Init,
  interfaceExists,
  interfaceMtu,
  type Live,
  LOOK_AGAIN_MS,
  liveDifference,
  putBack,
  quickUnitState,
  readBack,
  readInterface,
  readTunnel,
  renderConfig,
  sleep,
  unitEnabled,
  unitRunning,
  WIREGUARD_DIR,
  waitGone,
  waitUp,
  writeConfig,
} from "./wireguard.ts";

/** The ports the overlay needs beyond the contract's: the state directory, where the node's keys are. */
export interface OverlayPorts extends Ports {
  stateDir?: string;
}

/** The takeover account (overlay.md): given on every takeover, failures included. */
export type Account = "not taken" | "taken" | "down";

/** How a unit (or, without systemd, an interface) was found: what giving it back restores. */
export interface FoundRun {
  enabled: boolean;
  running: boolean;
}

export interface Takeover {
  interface: string;
  state: Account;
  port: number;
  address: string;
  range: string;
  peers: number;
  mtu: number;
  /** Where its unit reads it: `<wireguard dir>/<if>.conf`. */
  path: string;
  /** The digest its original is kept under in the holds; null when it had none. */
  kept: string | null;
  found: FoundRun;
  at: string;
  /** When its configuration was retired (the ledger is the record of it; this is for status). */
  retired?: string;
}

export interface OverlayRecord extends RecordBase {
  type: "overlay";
  interface: string;
  path: string;
  /** True when the mesh made the config; false when a file was found at its path (and its original held). */
  created: boolean;
  /** SHA-256 of the config last written: it carries a key, so never its content. */
  wrote: string;
  found: FoundRun;
  takeover?: Takeover;
}

/** The interfaces the mesh runs here, from the records: never a found tunnel to take. */
export function meshInterfaces(records: Record<string, { type: string; [k: string]: unknown }>): Set<string> {
  return new Set(
    Object.values(records).flatMap((r) =>
      r.type === "overlay" && typeof r.interface === "string" ? [r.interface] : [],
    ),
  );
}

// ---- the retirement ledger: in the state directory, apart from holds, and nothing writes a retired one back

const Retired = z.object({
  path: z.string(),
  original: z.string(),
  kept: z.string(),
  at: z.string(),
  by: z.string(),
  peer: z.string(),
});
export type Retired = z.infer<typeof Retired>;
const LedgerFile = z.object({ format: z.number().int(), retired: z.record(z.string(), Retired) });
export const LEDGER = "overlay-retired.json";
export const LEDGER_DIR = "overlay-retired";

/** Every found tunnel whose configuration the mesh retired, by interface: what status shows and a take consults. */
export function retiredTunnels(stateDir: string | undefined): Record<string, Retired> {
  if (!stateDir) return {};
  return new State(stateDir).readVersioned(LEDGER, LedgerFile)?.retired ?? {};
}

async function recordRetired(stateDir: string, iface: string, entry: Retired, original: Uint8Array) {
  const state = new State(stateDir).ensure();
  const dir = join(stateDir, LEDGER_DIR);
  mkdirSync(dir, { recursive: true, mode: STATE_DIR_MODE });
  await writeFileAtomic(join(stateDir, entry.kept), original, { mode: SECRET_FILE_MODE });
  state.writeVersioned(LEDGER, { retired: { ...retiredTunnels(stateDir), [iface]: entry } });
}

// ---- the takeover journal: the last account of each takeover, written before anything is stopped, so a host
// that dies between stopping the found tunnel and starting its own finds the takeover `down`, not missing

const TakeoverEntry = z.object({
  interface: z.string(),
  state: z.enum(["not taken", "taken", "down"]),
  port: z.number(),
  address: z.string(),
  range: z.string(),
  peers: z.number(),
  mtu: z.number(),
  path: z.string(),
  kept: z.string().nullable(),
  found: z.object({ enabled: z.boolean(), running: z.boolean() }),
  at: z.string(),
  retired: z.string().optional(),
});
const JournalFile = z.object({ format: z.number().int(), takeovers: z.record(z.string(), TakeoverEntry) });
export const JOURNAL = "overlay-takeover.json";

/** Every takeover's last account, by the found interface's name. */
export function takeovers(stateDir: string | undefined): Record<string, Takeover> {
  if (!stateDir) return {};
  return new State(stateDir).readVersioned(JOURNAL, JournalFile)?.takeovers ?? {};
}

function noteTakeover(stateDir: string | undefined, t: Takeover | { interface: string; forget: true }): void {
  if (!stateDir) return;
  const all = takeovers(stateDir);
  if ("forget" in t) delete all[t.interface];
  else all[t.interface] = t;
  new State(stateDir).writeVersioned(JOURNAL, { takeovers: all });
}

// ---- the node's overlay key

interface Key {
  private: string;
  public: string;
}

/** The node's overlay key, from its state directory; a reason never quotes the file. */
export function overlayKeyOf(stateDir: string | undefined): Key | string {
  if (!stateDir)
    return "the node's overlay key cannot be read: this host gave the applier no state directory";
  const path = keyPath(stateDir, "overlay");
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    return `the node's overlay key ${path} cannot be read: ${(e as NodeJS.ErrnoException).code} (enrol first)`;
  }
  const pair = overlayKeyFromB64(text);
  if (!pair) return `${path} is not a key file`;
  return { private: privateB64(pair.privateKey), public: publicB64(pair.publicKey) };
}

// ---- what decide reads

interface Survey {
  init: Init;
  key: Key;
  path: string;
  file: FoundFile | null;
  bytes: Uint8Array;
  sha: string;
  live: Live;
  mtu: number | null;
  unit: UnitState | null;
}

interface WriteData {
  bytes: Uint8Array;
  sha: string;
  hold?: FoundFile;
}

interface TakeData {
  takeover: Omit<Takeover, "state" | "kept" | "at">;
  config: FoundFile | null;
  /** False when the found interface is already down (a takeover that left it `down` is tried again). */
  stop: boolean;
}

interface RetireData {
  path: string;
  peer: string;
  handshake: number;
}

interface ApplyData {
  systemd: boolean;
  write?: WriteData;
  bring: "none" | "start" | "restart";
  take?: TakeData;
  retire?: RetireData;
  notes: string[];
  record: OverlayRecord;
}

const stepOf = stepsOf("overlay");

const refuse = (id: string, detail: string, field = "interface"): Step =>
  stepOf(id, "failed", "refuse", detail, undefined, field);

const stateDirOf = (ctx: DecideContext) => (ctx.ports as OverlayPorts).stateDir;
const initOf = async (ctx: DecideContext): Promise<Init> => ({
  systemd: await hasSystemd(ctx.ports.exec),
  exec: ctx.ports.exec,
});
const runner = (init: Init, iface: string) => (init.systemd ? `wg-quick@${iface}` : `wg-quick ${iface}`);

async function survey(wanted: OverlayResource, ctx: DecideContext): Promise<Survey | string> {
  const key = overlayKeyOf(stateDirOf(ctx));
  if (typeof key === "string") return key;
  const path = configPath(wanted.interface);
  const problem = placeProblem(ctx.ports.root, path);
  if (problem) return problem;
  const init = await initOf(ctx);
  const file = await readRegular(ctx.ports.root, path);
  if (typeof file === "string") return file;
  const bytes = Buffer.from(renderConfig(wanted, key.private), "utf8");
  const live = await readInterface(init.exec, wanted.interface);
  const mtu = live.kind === "up" ? await interfaceMtu(init.exec, wanted.interface) : null;
  const unit = init.systemd ? await quickUnitState(init, wanted.interface) : null;
  if (typeof unit === "string") return unit;
  return { init, key, path, file, bytes, sha: sha256(bytes), live, mtu, unit };
}

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

export const overlayApplier: Applier<OverlayResource, OverlayRecord> = {
  type: "overlay",

  async decide(wanted, record, ctx) {
    if (record && record.interface !== wanted.interface)
      return refuse(
        wanted.id,
        `was ${record.interface} and is now ${wanted.interface}: a new interface name is a new overlay (declare it under a new id)`,
      );
    const s = await survey(wanted, ctx);
    if (typeof s === "string") return refuse(wanted.id, s);
    const notes: string[] = [];
    let take: TakeData | undefined;
    let retire: RetireData | undefined;
    if (wanted.takes) {
      const t = await decideTakes(wanted, record, s, ctx);
      if (t.kind === "refuse") return refuse(wanted.id, t.detail, t.field);
      take = t.take;
      retire = t.retire;
      notes.push(...t.notes);
    }
    const fileRight = s.file !== null && s.file.sha === s.sha && s.file.mode === SECRET_FILE_MODE;
    const hold = s.file && !record?.created && s.file.sha !== record?.wrote ? s.file : undefined;
    const write = fileRight ? undefined : { bytes: s.bytes, sha: s.sha, hold };
    const diff = runningDifference(wanted, s);
    const isUp = s.live.kind === "up" || (s.unit !== null && unitRunning(s.unit));
    const bring = write || diff ? (isUp ? "restart" : "start") : "none";
    const nextRecord: OverlayRecord = {
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
    const data: ApplyData = {
      systemd: s.init.systemd,
      write,
      bring,
      take,
      retire,
      notes,
      record: nextRecord,
    };
    const changes = take || write || bring !== "none" || retire;
    if (!changes)
      return stepOf(
        wanted.id,
        "unchanged",
        "none",
        [`${wanted.interface} is as declared`, ...notes].join("; "),
        data,
      );
    const did = !record ? "created" : record.wrote === s.sha && !take && !retire ? "repaired" : "updated";
    const what: string[] = [];
    if (take) what.push(`take over ${take.takeover.interface} (${facts(take.takeover)})`);
    if (write) what.push(`write ${s.path} (0600)${hold && !record ? ", the file found there held" : ""}`);
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
  },

  async decideRemoval(id, record, ctx) {
    const init = await initOf(ctx);
    const retired = record.takeover ? retiredTunnels(stateDirOf(ctx))[record.takeover.interface] : undefined;
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
    });
  },

  async execute(step, wanted, record, ctx): Promise<Executed<OverlayRecord>> {
    switch (step.action) {
      case "none": {
        const d = step.data as ApplyData;
        return { did: "unchanged", detail: step.detail, record: d.record };
      }
      case "apply":
        return applyStep(step, wanted!, ctx);
      case "remove":
        return removeStep(step, record!, ctx);
      default:
        return { did: "failed", detail: step.detail, record: record ?? null };
    }
  },
};

// ---- takeover: decided read only, in overlay.md's order

type TakeDecision =
  | { kind: "refuse"; detail: string; field: string }
  | { kind: "ok"; take?: TakeData; retire?: RetireData; notes: string[] };

export function facts(t: { port: number; range: string; peers: number; mtu: number }): string {
  return `port ${t.port}, range ${t.range || "unknown"}, ${t.peers} peer(s)${t.mtu ? `, MTU ${t.mtu}` : ""}`;
}

/** The account in one line, as every takeover gives it. */
export function accountLine(t: Takeover, why?: string): string {
  const kept = t.kept
    ? `original kept in holds as sha256:${t.kept.slice(0, 12)}`
    : "no configuration to keep";
  return `takeover of ${t.interface}: ${t.state} (${facts(t)}; ${kept})${why ? ` — ${why}` : ""}`;
}

async function decideTakes(
  wanted: OverlayResource,
  record: OverlayRecord | undefined,
  s: Survey,
  ctx: DecideContext,
): Promise<TakeDecision> {
  const name = wanted.takes!;
  const stateDir = stateDirOf(ctx);
  const retired = retiredTunnels(stateDir)[name];
  // the record, or the journal when the host died before the record was written
  const prior = record?.takeover?.interface === name ? record.takeover : takeovers(stateDir)[name];
  if (retired || prior?.state === "taken") {
    const beside = await besideTheMesh(wanted, s, name);
    if (beside.kind === "refuse") return beside;
    const notes = beside.note ? [beside.note] : [];
    if (retired) {
      notes.push(`${name} was retired at ${retired.at}: nothing of it is written back`);
      const back = await readRegular(ctx.ports.root, retired.path);
      if (back && typeof back !== "string")
        notes.push(`${retired.path} was put back by hand; it is left as it is`);
      return { kind: "ok", notes };
    }
    const r = await decideRetire(wanted, prior!, s, ctx);
    if (typeof r === "string") notes.push(`${name}'s configuration kept: ${r}`);
    return { kind: "ok", retire: typeof r === "string" ? undefined : r, notes };
  }
  return decideTakeover(wanted, prior, s, ctx);
}

/** After the takeover: the found interface back beside the mesh's is said (its unit) or refused (by hand). */
async function besideTheMesh(
  wanted: OverlayResource,
  s: Survey,
  name: string,
): Promise<{ kind: "refuse"; detail: string; field: string } | { kind: "ok"; note?: string }> {
  if (!(await interfaceExists(s.init.exec, name))) return { kind: "ok" };
  if (s.init.systemd) {
    const unit = await quickUnitState(s.init, name);
    if (typeof unit !== "string" && unitRunning(unit))
      return {
        kind: "ok",
        note: `wg-quick@${name} was started again by hand beside ${wanted.interface}: it is left running, not stopped (two interfaces with one key fight; \`systemctl disable --now wg-quick@${name}\` ends it)`,
      };
  }
  await sleep(LOOK_AGAIN_MS);
  if (!(await interfaceExists(s.init.exec, name))) return { kind: "ok" };
  return {
    kind: "refuse",
    field: "takes",
    detail: `${name} is up again beside ${wanted.interface}, raised by hand: \`wg-quick down ${name}\` (${wanted.interface} carries its tunnel now)`,
  };
}

/** The guards before anything is stopped: the found port, address and key, and a configuration to keep. */
async function decideTakeover(
  wanted: OverlayResource,
  prior: Takeover | undefined,
  s: Survey,
  ctx: DecideContext,
): Promise<TakeDecision> {
  const name = wanted.takes!;
  const no = (
    field: string,
    why: string,
    f?: { port: number; range: string; peers: number; mtu: number },
  ) => ({
    kind: "refuse" as const,
    field,
    detail: `takeover of ${name}: not taken${f ? ` (${facts(f)}; left running)` : ""} — ${why}`,
  });
  const exists = await interfaceExists(s.init.exec, name);
  if (!exists && prior?.state === "down")
    return {
      kind: "ok",
      notes: [`${name} was left down by the last attempt; taking it over again`],
      take: { takeover: { ...prior }, config: null, stop: false },
    };
  if (!exists)
    return no(
      "takes",
      `no interface ${name} is up: start it (\`systemctl start wg-quick@${name}\` or \`wg-quick up ${name}\`), or declare the overlay without takes`,
    );
  const unit = s.init.systemd ? await quickUnitState(s.init, name) : null;
  if (typeof unit === "string") return no("takes", unit);
  if (unit && !unitRunning(unit)) {
    await sleep(LOOK_AGAIN_MS);
    const again = await quickUnitState(s.init, name);
    if (typeof again === "string" || !unitRunning(again))
      return no(
        "takes",
        `${name} is up but not by wg-quick@${name} (raised by hand), so stopping a unit would not stop it: \`wg-quick down ${name}\`, then \`systemctl start wg-quick@${name}\``,
      );
  }
  const found = await readTunnel(s.init.exec, ctx.ports.root, name);
  if (typeof found === "string") return no("takes", found);
  const t = found.tunnel;
  if (!found.config)
    return no(
      "takes",
      `${name} has no configuration at ${configPath(name)} to keep (raised by hand?): \`wg-quick down ${name}\` and bring it up from a configuration`,
      t,
    );
  if (found.privateKey !== s.key.private)
    return no(
      "takes",
      `the node's overlay key is not ${name}'s key: \`mesh-host overlay take --tunnel ${name}\` takes it and tells the mesh`,
      t,
    );
  if (wanted.listen_port !== t.port)
    return no(
      "listen_port",
      `${name} listens on ${t.port} and the declaration says ${wanted.listen_port ?? "none"}: its peers dial ${t.port}, so the mesh's interface must listen there`,
      t,
    );
  const declared = wanted.address.split("/")[0];
  if (declared !== t.address)
    return no(
      "address",
      `${name} is at ${t.address || "no address"} and the declaration says ${declared}: the mesh's interface must take the found address`,
      t,
    );
  if (t.mtu && wanted.mtu === undefined)
    return no(
      "mtu",
      `${name} runs at MTU ${t.mtu} (its [Interface] says so) and the declaration gives none: the mesh's interface would fall back to the default`,
      t,
    );
  const takeover = {
    ...t,
    path: configPath(name),
    found: unit
      ? { enabled: unitEnabled(unit), running: unitRunning(unit) }
      : { enabled: false, running: true },
  };
  return { kind: "ok", notes: [], take: { takeover, config: found.config, stop: true } };
}

/** Retire once a peer has handshaken with the mesh's interface; otherwise why the found configuration is kept. */
async function decideRetire(
  wanted: OverlayResource,
  t: Takeover,
  s: Survey,
  ctx: DecideContext,
): Promise<RetireData | string> {
  if (s.live.kind === "unknown") return `wg does not answer (${s.live.reason})`;
  if (s.live.kind !== "up") return `${wanted.interface} is not up, so no handshake proves it`;
  const peer = s.live.dump.peers
    .filter((p) => p.latestHandshake > 0)
    .sort((a, b) => b.latestHandshake - a.latestHandshake)[0];
  if (!peer) return `no peer has handshaken with ${wanted.interface} yet`;
  const problem = retirePathProblem(t, s, ctx);
  if (problem) return problem;
  if (!stateDirOf(ctx)) return "no state directory to record its retirement in";
  const original = t.kept ? await ctx.ports.holds.original(t.path) : null;
  if (!original || original.sha !== t.kept) return "its kept original does not verify, so the live one stays";
  return { path: t.path, peer: peer.publicKey, handshake: peer.latestHandshake };
}

/** Nothing is removed unless it is `<wireguard dir>/<if>.conf`, not a path the mesh writes, and not a link. */
function retirePathProblem(t: Takeover, s: Survey, ctx: DecideContext): string | null {
  if (interfaceNameProblem(t.interface) || t.path !== `${WIREGUARD_DIR}/${t.interface}.conf`)
    return `${t.path} is not ${WIREGUARD_DIR}/<interface>.conf`;
  if (t.path === s.path || ctx.declaredPaths.has(t.path)) return `${t.path} is a path the mesh writes`;
  return placeProblem(ctx.ports.root, t.path);
}

// ---- execution

async function applyStep(
  step: Step,
  wanted: OverlayResource,
  ctx: DecideContext,
): Promise<Executed<OverlayRecord>> {
  const d = step.data as ApplyData;
  const init: Init = { systemd: d.systemd, exec: ctx.ports.exec };
  const key = overlayKeyOf(stateDirOf(ctx));
  if (typeof key === "string") return { did: "failed", detail: key, record: null };
  let record = d.record;
  let held: Executed<OverlayRecord>["held"];
  const said: string[] = [];
  if (d.write?.hold)
    held = {
      path: record.path,
      original: await ctx.ports.holds.keep(record.path, d.write.hold.bytes, d.write.hold),
    };
  if (d.take) {
    const taken = await takeOver(d, wanted, key, init, ctx);
    record = { ...record, takeover: taken.takeover };
    if (taken.held) held = taken.held;
    if (!taken.ok) return { did: "failed", detail: taken.said, record, held };
    said.push(taken.said);
  } else {
    if (d.write) await writeConfig(ctx.ports.root, record.path, d.write.bytes);
    if (d.bring !== "none") {
      const e = await bringUp(init, wanted.interface, d.bring === "restart");
      if (e) return { did: "failed", detail: `${wanted.interface} did not start: ${e}`, record, held };
    }
    const back = await readBack(init.exec, wanted, key.public);
    if (back) return { did: "failed", detail: `read back: ${back}`, record, held };
  }
  if (d.retire && record.takeover) {
    const r = await retire(d.retire, record.takeover, wanted, ctx);
    said.push(r.said);
    if (r.at) {
      record = { ...record, takeover: { ...record.takeover, retired: r.at } };
      noteTakeover(stateDirOf(ctx), record.takeover!);
    }
  }
  const detail = [
    step.detail.split("; ")[0],
    ...said,
    ...d.notes,
    await describeLive(init.exec, wanted.interface),
  ].join("; ");
  return { did: step.did, detail, record, held };
}

async function takeOver(
  d: ApplyData,
  wanted: OverlayResource,
  key: Key,
  init: Init,
  ctx: DecideContext,
): Promise<{ ok: boolean; takeover: Takeover; said: string; held?: Executed<OverlayRecord>["held"] }> {
  const t = d.take!;
  const name = t.takeover.interface;
  const at = new Date().toISOString();
  let kept: string | null = (t.takeover as Partial<Takeover>).kept ?? null;
  let held: Executed<OverlayRecord>["held"];
  // 1. the found configuration is kept like any held file, once
  if (t.config) {
    kept = await ctx.ports.holds.keep(t.takeover.path, t.config.bytes, t.config);
    held = { path: t.takeover.path, original: kept };
  }
  const result = (state: Account, why?: string) => {
    const takeover: Takeover = { ...t.takeover, state, kept, at };
    noteTakeover(stateDirOf(ctx), takeover);
    return { ok: state === "taken", takeover, said: accountLine(takeover, why), held };
  };
  // 2. the mesh's configuration is written before anything is stopped
  if (d.write) await writeConfig(ctx.ports.root, d.record.path, d.write.bytes);
  // written down as `down` before anything is stopped: a crash from here on is found, not forgotten
  noteTakeover(stateDirOf(ctx), { ...t.takeover, state: "down", kept, at });
  // 3. the found unit stopped and disabled; nothing flushed
  if (t.stop) {
    const stopped = await bringDown(init, name, true);
    if (stopped) {
      const back = await putBack(init, name, t.takeover.found);
      return result(
        back ? "down" : "not taken",
        `${name} could not be stopped: ${stopped}${back ? `; putting it back failed: ${back}` : ""}`,
      );
    }
    if (!(await waitGone(init.exec, name))) {
      await putBack(init, name, { enabled: t.takeover.found.enabled, running: false });
      return result(
        "not taken",
        `${name} is still up after ${runner(init, name)} stopped, so it was raised by hand: \`wg-quick down ${name}\`, then apply again`,
      );
    }
  }
  // 4. the mesh's interface; if it will not start, the found one is started again
  const running = (await readInterface(init.exec, wanted.interface)).kind === "up";
  const started = await bringUp(init, wanted.interface, running);
  const failed = started ?? (await readBack(init.exec, wanted, key.public));
  if (!failed) return result("taken", `${wanted.interface} up in its place`);
  await bringDown(init, wanted.interface, true);
  const again = await putBack(init, name, { enabled: t.takeover.found.enabled, running: true });
  const up = !again && (await waitUp(init.exec, name));
  return result(
    up ? "not taken" : "down",
    `${wanted.interface} did not start (${failed}); ${up ? `${name} started again` : `${name} could not be started again${again ? `: ${again}` : ""}`}`,
  );
}

/** Remove the found configuration from where its unit reads it, its original verified and recorded first. */
async function retire(
  r: RetireData,
  t: Takeover,
  wanted: OverlayResource,
  ctx: DecideContext,
): Promise<{ said: string; at?: string }> {
  const stateDir = stateDirOf(ctx)!;
  const keptNot = (why: string) => ({ said: `${t.interface}'s configuration kept: ${why}` });
  const original = await ctx.ports.holds.original(r.path);
  if (!original || original.sha !== t.kept) return keptNot("its kept original does not verify");
  const live = await readRegular(ctx.ports.root, r.path);
  if (typeof live === "string") return keptNot(live);
  const at = new Date().toISOString();
  const kept = `${LEDGER_DIR}/${original.sha}`;
  // recorded before anything is removed: a crash between the two still finds it retired
  await recordRetired(
    stateDir,
    t.interface,
    { path: r.path, original: original.sha, kept, at, by: wanted.interface, peer: r.peer },
    original.bytes,
  );
  if (live) await removeRegular(ctx.ports.root, r.path);
  await ctx.ports.holds.release(r.path);
  const when = new Date(r.handshake * 1000).toISOString();
  return {
    at,
    said: `${t.interface}'s configuration retired: peer ${r.peer.slice(0, 8)}… handshook with ${wanted.interface} at ${when}; ${r.path} ${live ? "removed" : "was already gone"}, its original kept at ${join(stateDir, kept)}`,
  };
}

async function removeStep(
  step: Step,
  record: OverlayRecord,
  ctx: DecideContext,
): Promise<Executed<OverlayRecord>> {
  const { systemd, retired } = step.data as { systemd: boolean; retired: boolean };
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
    else if (t.kept) await ctx.ports.holds.release(t.path);
    if (t.state !== "not taken") {
      const back = await putBack(init, t.interface, t.found);
      said.push(
        back ? `${t.interface} could not be given back: ${back}` : `${t.interface} given back as found`,
      );
    }
  }
  // given back or retired, the takeover is over: a later declaration that takes it again starts afresh
  if (t && !retired) noteTakeover(stateDirOf(ctx), { interface: t.interface, forget: true });
  return { did: "removed", detail: said.join("; "), record: null };
}

/** The config the mesh created is removed (unless changed by hand); a found one is given its original back. */
async function giveBackConfig(
  path: string,
  created: boolean,
  wrote: string,
  ctx: DecideContext,
): Promise<string> {
  const { root, holds } = ctx.ports;
  const found = await readRegular(root, path);
  if (typeof found === "string") return `${path} left: ${found}`;
  if (created) {
    if (!found) return `${path} was already gone`;
    if (found.sha !== wrote) return `${path} left in place: changed by hand since the mesh wrote it`;
    await removeRegular(root, path);
    return `${path} removed`;
  }
  const original = await holds.original(path);
  if (!original) return `${path}: no original is held to give back`;
  if (!found || found.sha !== original.sha) {
    const { mode, uid, gid } = original.meta;
    await writeRegular(root, path, original.bytes, mode, ctx.ports.rootless ? undefined : { uid, gid });
  }
  await holds.release(path);
  return `${path} given back its original`;
}
