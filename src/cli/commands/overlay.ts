// `overlay take --tunnel <if>` (overlay.md): for a node that enrolled before the mesh knew to take a tunnel over.
// The found interface's key becomes the overlay key — identity and sealing keys untouched, so nothing sealed to
// the node is remade — and the mesh is told first, written second: the signed rekey is acknowledged by the
// stream before the key is saved, so a run again puts right whichever half did not happen.
// Also what `status` shows of the overlay (overlayStatus, overlayStatusLines): this file loads no bus client.
import {
  facts,
  meshInterfaces,
  OverlayRecord,
  retiredTunnels,
  type Takeover,
  takeovers,
} from "../../appliers/arch/overlay/index.ts";
import type { Rekey } from "../../link/index.ts";
import {
  acquireLock,
  loadKeys,
  OverlayState,
  overlayKeyFromB64,
  publicB64,
  saveKey,
} from "../../store/index.ts";
import { readTunnel } from "../../system/arch/index.ts";
import { localExec } from "../../system/index.ts";
import { interfaceNameProblem } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import type { Context } from "../context.ts";
import { writeJson, writeOut } from "../output.ts";
import type { OverlayShown } from "../parts.ts";

export async function overlayCommand(ctx: Context): Promise<number> {
  const { iface, membership, node } = takeAsked(ctx);
  // the bus client is loaded here, not at the top: `status` reads this file and must start without it
  const { signRekey, tellRekey } = await import("../../link/index.ts");
  const lock = await acquireLock(ctx.state.ensure().dir);
  try {
    const t = await tunnelToTake(ctx, iface);
    const told = readTold(ctx);
    const written = t.current === t.taken;
    if (written && told?.body.taken !== t.taken) {
      // the key was taken at enrolment: the question carried it and the tunnel, so there is nothing to tell
      say(
        ctx,
        { node, interface: iface, taken: t.taken, told: null, written: false },
        `${iface}'s key is already this node's overlay key (taken at enrolment): nothing to tell`,
      );
      return 0;
    }
    // the same message again when only the write was left undone; otherwise a fresh one over the key left
    const rekey: Rekey =
      told && told.body.taken === t.taken && (written || told.body.left === t.current)
        ? told
        : signRekey({ v: 1, node, left: t.current, taken: t.taken, tunnel: t.tunnel }, t.identityKey);
    const said = await tellRekey(membership, rekey, { identity: t.identityKey });
    if (!said.ok) {
      process.stderr.write(
        `mesh-host: ${said.reason}; nothing was written: run it again once the bus is there\n`,
      );
      return 1;
    }
    // what was told, kept so a run after the key was written can say exactly the same again
    new OverlayState(ctx.state).writeTold(rekey, said.seq);
    if (!written) saveKey(ctx.state.dir, "overlay", t.pair);
    ctx.log.info({ interface: iface, seq: said.seq }, "overlay key taken; the mesh was told");
    sayTaken(ctx, { node, iface, rekey, said, written });
    return 0;
  } finally {
    lock.release();
  }
}

/** The interface `overlay take` was asked for, and the enrolment it is told under: refused in one line else. */
function takeAsked(ctx: Context) {
  const [verb, ...extra] = ctx.args.positionals;
  if (verb !== "take" || extra.length)
    throw new UsageError("usage: mesh-host overlay take --tunnel <interface>");
  const iface = ctx.args.tunnel;
  if (!iface)
    throw new UsageError("overlay take needs --tunnel <interface>: the WireGuard interface to take");
  const problem = interfaceNameProblem(iface);
  if (problem) throw new UsageError(`--tunnel ${problem}`);
  const membership = ctx.state.readMembership();
  const node = ctx.state.readNode();
  if (!membership || !node)
    throw new UsageError(
      "this node is not enrolled: `mesh-host enrol` (the code on standard input) takes a tunnel found then",
    );
  return { iface, membership, node: node.node };
}

/** The found tunnel's key pair and facts, with the node's keys beside them; refused when it is not one to take. */
async function tunnelToTake(ctx: Context, iface: string) {
  if (meshInterfaces(ctx.state.readRecords().records).has(iface))
    throw new UsageError(`${iface} is the mesh's own interface, not a tunnel to take`);
  const keys = loadKeys(ctx.state.dir);
  if (!keys.ok) throw new UsageError(keys.reason);
  const found = await readTunnel(localExec(), ctx.args.root, iface);
  if (typeof found === "string") throw new UsageError(`cannot take ${iface}: ${found}`);
  const pair = overlayKeyFromB64(found.privateKey);
  if (!pair) throw new UsageError(`cannot take ${iface}: its private key is not a WireGuard key`);
  return {
    pair,
    tunnel: found.tunnel,
    taken: publicB64(pair.publicKey),
    current: publicB64(keys.keys.overlay.publicKey),
    identityKey: keys.keys.identity.privateKey,
  };
}

function sayTaken(
  ctx: Context,
  o: {
    node: string;
    iface: string;
    rekey: Rekey;
    said: { seq: number; duplicate: boolean };
    written: boolean;
  },
): void {
  const { iface, rekey, said, written } = o;
  const t = rekey.body.tunnel;
  say(
    ctx,
    {
      node: o.node,
      interface: iface,
      taken: rekey.body.taken,
      left: rekey.body.left,
      tunnel: t,
      told: { seq: said.seq, duplicate: said.duplicate },
      written: !written,
    },
    written
      ? `${iface}'s key was already this node's overlay key; the mesh was told again (REKEY message ${said.seq}${said.duplicate ? ", the same one" : ""})`
      : `took ${iface}'s key as this node's overlay key (${t.address || "no address"}; ${facts(t)}); the mesh was told first (REKEY message ${said.seq})`,
  );
}

/** The rekey last told, as signed; null when none was, or it was told in the unsigned form before v2. */
function readTold(ctx: Context): Rekey | null {
  const told = new OverlayState(ctx.state).readTold() as Partial<Rekey> | null;
  return told?.body && told.signed?.v === 2 ? (told as Rekey) : null;
}

function say(ctx: Context, doc: object, line: string): void {
  if (ctx.args.json) writeJson(doc);
  else writeOut(line);
}

// What `status` shows of the overlay, from the state alone (no command is run): the mesh's interface, and the
// account of the tunnel it took — taken and held until a handshake, retired, not taken, or down.

export interface OverlayStatus {
  interface: string | null;
  config: string | null;
  /** The found tunnel it takes: the account, its facts, where its original is. */
  takeover: (Takeover & { original?: string }) | null;
}

export function overlayStatus(
  overlay: OverlayState,
  records: Record<string, { type: string }>,
): OverlayStatus[] {
  const journal = takeovers(overlay);
  const retired = retiredTunnels(overlay);
  const out: OverlayStatus[] = [];
  const seen = new Set<string>();
  for (const r of Object.values(records)) {
    // parsed by the overlay's record schema, as the apply parses it: another type's record is none of its
    const parsed = OverlayRecord.safeParse(r);
    if (!parsed.success) continue;
    const rec = parsed.data;
    const t = rec.takeover ? (journal[rec.takeover.interface] ?? rec.takeover) : null;
    if (t) seen.add(t.interface);
    const gone = t ? retired[t.interface] : undefined;
    out.push({
      interface: rec.interface,
      config: rec.path,
      takeover: t
        ? { ...t, ...(gone ? { retired: gone.at, original: overlay.keptPath(gone.kept) } : {}) }
        : null,
    });
  }
  for (const [name, gone] of Object.entries(retired))
    if (!seen.has(name) && journal[name])
      out.push({
        interface: null,
        config: null,
        takeover: { ...journal[name], retired: gone.at, original: overlay.keptPath(gone.kept) },
      });
  return out;
}

/** What `status` shows of the overlay (handed to it by the Linux root): the account, and its lines. */
export function overlayShown(ctx: Context): OverlayShown {
  const status = overlayStatus(new OverlayState(ctx.state), ctx.state.readRecords().records);
  return { status, lines: overlayStatusLines(status) };
}

/** One line each, as `status` prints them after `overlay:`. */
export function overlayStatusLines(status: OverlayStatus[]): string[] {
  if (!status.length) return ["(none declared)"];
  return status.map((o) => {
    const t = o.takeover;
    const own = `${o.interface} (${o.config})`;
    if (!t) return own;
    if (!o.interface)
      return `${t.interface} retired at ${t.retired}, its original at ${t.original} (no overlay declared now)`;
    const head = `${own} takes ${t.interface}: ${t.state} (${facts(t)}) at ${t.at}`;
    if (t.retired) return `${head}; ${t.interface} retired at ${t.retired}, its original at ${t.original}`;
    if (t.state === "taken")
      return `${head}; ${t.interface}'s configuration held until a peer handshakes with ${o.interface}`;
    if (t.state === "not taken")
      return `${head}; ${t.interface} runs as it was found (the last report says why)`;
    return `${head}; neither may be up: \`systemctl start wg-quick@${t.interface}\` (or \`wg-quick up ${t.interface}\`) puts the found tunnel back`;
  });
}
