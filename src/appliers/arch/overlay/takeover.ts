// Taking over a found tunnel (overlay.md): nothing is stopped until the declared interface would listen on
// the found port at the found address with the found key; the found configuration is held, its unit stopped
// and disabled, nothing flushed; a mesh interface that fails to start has the found one started again. Every
// takeover, failures included, ends in one account, journalled before anything is stopped.

import {
  bringDown,
  bringUp,
  configPath,
  type FoundFile,
  type Init,
  interfaceExists,
  LOOK_AGAIN_MS,
  putBack,
  quickUnitState,
  rangeOf,
  readBack,
  readInterface,
  readRegular,
  readTunnel,
  sleep,
  type TunnelFacts,
  type UnitState,
  unitEnabled,
  unitRunning,
  waitGone,
  waitUp,
  writeConfig,
} from "../../../system/arch/index.ts";
import type { OverlayResource } from "../../../vocabulary/index.ts";
import type { DecideContext } from "../../types.ts";
import { type Account, noteTakeover, retiredTunnels, type Takeover, takeovers } from "./ledger.ts";
import { decideRetire, provingPeer, type RetireData } from "./retire.ts";
import { type Key, overlayStateOf, runner, type Survey } from "./survey.ts";

export interface TakeData {
  /** `kept`: what an attempt that left the interface `down` already kept, taken again as it is. */
  takeover: Omit<Takeover, "state" | "kept" | "at"> & Partial<Pick<Takeover, "kept">>;
  config: FoundFile | null;
  /** False when the found interface is already down (a takeover that left it `down` is tried again). */
  stop: boolean;
}

/** What of the apply step a takeover reads: the mesh's configuration, written before anything is stopped. */
interface TakeStep {
  take: TakeData;
  write?: { bytes: Uint8Array };
  record: { path: string };
}

// ---- takeover: decided read only, in overlay.md's order

type TakeDecision =
  | { kind: "refuse"; detail: string; field: string }
  | { kind: "ok"; take?: TakeData; retire?: RetireData; notes: string[] };

export function facts(t: { port: number; range: string; peers: number; mtu: number }): string {
  return `port ${t.port}, range ${t.range || "unknown"}, ${t.peers} peer(s)${t.mtu ? `, MTU ${t.mtu}` : ""}`;
}

/** The account in one line, as every takeover gives it. */
export function accountLine(t: Takeover, why?: string): string {
  // no digest: the configuration carries a private key
  const kept = t.kept ? "original kept in holds" : "no configuration to keep";
  return `takeover of ${t.interface}: ${t.state} (${facts(t)}; ${kept})${why ? ` — ${why}` : ""}`;
}

export async function decideTakes(
  wanted: OverlayResource,
  record: { takeover?: Takeover } | undefined,
  s: Survey,
  ctx: DecideContext,
): Promise<TakeDecision> {
  const name = wanted.takes!;
  const overlay = overlayStateOf(ctx);
  const retired = retiredTunnels(overlay)[name];
  // the record, or the journal when the host died before the record was written
  const prior = record?.takeover?.interface === name ? record.takeover : takeovers(overlay)[name];
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

type Refusal = Extract<TakeDecision, { kind: "refuse" }>;

/** The account of a takeover refused before anything was stopped, the found tunnel's facts said when known. */
function notTaken(
  name: string,
  field: string,
  why: string,
  f?: { port: number; range: string; peers: number; mtu: number },
): Refusal {
  return {
    kind: "refuse",
    field,
    detail: `takeover of ${name}: not taken${f ? ` (${facts(f)}; left running)` : ""} — ${why}`,
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
  const exists = await interfaceExists(s.init.exec, name);
  if (!exists && prior?.state === "down")
    return {
      kind: "ok",
      notes: [`${name} was left down by the last attempt; taking it over again`],
      take: { takeover: { ...prior }, config: null, stop: false },
    };
  if (!exists)
    return notTaken(
      name,
      "takes",
      `no interface ${name} is up: start it (\`systemctl start wg-quick@${name}\` or \`wg-quick up ${name}\`), or declare the overlay without takes`,
    );
  const unit = await stoppableUnit(name, s);
  if (typeof unit === "string") return notTaken(name, "takes", unit);
  const found = await readTunnel(s.init.exec, ctx.ports.root, name);
  if (typeof found === "string") return notTaken(name, "takes", found);
  const t = found.tunnel;
  if (!found.config)
    return notTaken(
      name,
      "takes",
      `${name} has no configuration at ${configPath(name)} to keep (raised by hand?): \`wg-quick down ${name}\` and bring it up from a configuration`,
      t,
    );
  if (found.privateKey !== s.key.private)
    return notTaken(
      name,
      "takes",
      `the node's overlay key is not ${name}'s key: \`mesh-host overlay take --tunnel ${name}\` takes it and tells the mesh`,
      t,
    );
  const differs = keptDifference(wanted, t);
  if (differs) return notTaken(name, differs.field, differs.why, t);
  const takeover = {
    ...t,
    path: configPath(name),
    found: unit
      ? { enabled: unitEnabled(unit), running: unitRunning(unit) }
      : { enabled: false, running: true },
  };
  return { kind: "ok", notes: [], take: { takeover, config: found.config, stop: true } };
}

/**
 * The found interface's wg-quick unit (null without systemd), or why stopping it would not stop the interface:
 * one raised by hand beside a unit that is not running (looked at twice, a unit may be starting).
 */
async function stoppableUnit(name: string, s: Survey): Promise<UnitState | null | string> {
  const unit = s.init.systemd ? await quickUnitState(s.init, name) : null;
  if (typeof unit === "string" || !unit || unitRunning(unit)) return unit;
  await sleep(LOOK_AGAIN_MS);
  const again = await quickUnitState(s.init, name);
  if (typeof again === "string" || !unitRunning(again))
    return `${name} is up but not by wg-quick@${name} (raised by hand), so stopping a unit would not stop it: \`wg-quick down ${name}\`, then \`systemctl start wg-quick@${name}\``;
  return unit;
}

/**
 * What the takeover promises to keep that the declaration would change, naming both values: the port its peers
 * dial, the address and range they route to, and the MTU the path was tuned to (a path tuned to 1380 falling
 * back to 1420 passes ping and breaks TLS: the seeds' regression). Peers are the mesh's to compose.
 */
function keptDifference(wanted: OverlayResource, t: TunnelFacts): { field: string; why: string } | null {
  const name = t.interface;
  if (wanted.listen_port !== t.port)
    return {
      field: "listen_port",
      why: `${name} listens on ${t.port} and the declaration says ${wanted.listen_port ?? "none"}: its peers dial ${t.port}, so the mesh's interface must listen there`,
    };
  const declared = wanted.address.split("/")[0];
  if (declared !== t.address)
    return {
      field: "address",
      why: `${name} is at ${t.address || "no address"} and the declaration says ${declared}: the mesh's interface must take the found address`,
    };
  if (t.range && rangeOf(wanted.address) !== t.range)
    return {
      field: "address",
      why: `${name}'s range is ${t.range} and the declaration's ${wanted.address} makes it ${rangeOf(wanted.address)}: its peers are routed by the found range`,
    };
  if ((wanted.mtu ?? 0) === t.mtu) return null;
  const found = t.mtu ? `runs at MTU ${t.mtu} (its [Interface] says so)` : "names no MTU (wg-quick sets one)";
  const said = wanted.mtu === undefined ? "gives none" : `says ${wanted.mtu}`;
  const keep = t.mtu ? `declare mtu: ${t.mtu}` : "declare no mtu";
  return {
    field: "mtu",
    why: `${name} ${found} and the declaration ${said}: the path was tuned to what was found, and a changed MTU passes ping and breaks TLS (${keep})`,
  };
}

// ---- carried out

export async function takeOver(
  d: TakeStep,
  wanted: OverlayResource,
  key: Key,
  init: Init,
  ctx: DecideContext,
): Promise<{ ok: boolean; takeover: Takeover; said: string }> {
  const t = d.take;
  const name = t.takeover.interface;
  const at = new Date().toISOString();
  let kept: string | null = t.takeover.kept ?? null;
  // 1. the found configuration is kept like any held file, once
  if (t.config) {
    // a WireGuard configuration carries its private key: its digest is said nowhere
    kept = await ctx.ports.originals.keep(t.takeover.path, t.config.bytes, t.config, true);
  }
  const result = (state: Account, why?: string) => {
    const takeover: Takeover = { ...t.takeover, state, kept, at };
    noteTakeover(overlayStateOf(ctx), takeover);
    return { ok: state === "taken", takeover, said: accountLine(takeover, why) };
  };
  // 2. the mesh's configuration is written before anything is stopped
  if (d.write) await writeConfig(ctx.ports.root, d.record.path, d.write.bytes);
  // written down as `down` before anything is stopped: a crash from here on is found, not forgotten
  noteTakeover(overlayStateOf(ctx), { ...t.takeover, state: "down", kept, at });
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
  if (!failed)
    return result("taken", `${wanted.interface} up in its place; ${await keptWhy(init, wanted, name)}`);
  await bringDown(init, wanted.interface, true);
  const again = await putBack(init, name, { enabled: t.takeover.found.enabled, running: true });
  const up = !again && (await waitUp(init.exec, name));
  return result(
    up ? "not taken" : "down",
    `${wanted.interface} did not start (${failed}); ${up ? `${name} started again` : `${name} could not be started again${again ? `: ${again}` : ""}`}`,
  );
}

/** Why the found configuration is kept after a takeover, as every later report says it until it is retired. */
async function keptWhy(init: Init, wanted: OverlayResource, name: string): Promise<string> {
  const peer = provingPeer(wanted.interface, await readInterface(init.exec, wanted.interface));
  if (typeof peer === "string") return `${name}'s configuration kept: ${peer}`;
  return `${name}'s configuration kept until the next apply retires it: peer ${peer.publicKey.slice(0, 8)}… has handshaken with ${wanted.interface}`;
}
