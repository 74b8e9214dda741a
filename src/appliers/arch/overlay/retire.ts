// Retiring a taken tunnel's configuration (overlay.md): once a peer has handshaken with the mesh's interface,
// the found configuration is removed from where its unit reads it, its original verified and recorded in the
// ledger first, so a crash between the two still finds it retired and giving the overlay back never writes it.

import { type Live, readRegular, removeRegular, WIREGUARD_DIR } from "../../../system/arch/index.ts";
import { placeProblem } from "../../../system/index.ts";
import { interfaceNameProblem, type OverlayResource } from "../../../vocabulary/index.ts";
import type { DecideContext } from "../../types.ts";
import type { Takeover } from "./ledger.ts";
import { overlayStateOf, type Survey } from "./survey.ts";

export interface RetireData {
  path: string;
  peer: string;
  handshake: number;
}

/** Retire once a peer has handshaken with the mesh's interface; otherwise why the found configuration is kept. */
export async function decideRetire(
  wanted: OverlayResource,
  t: Takeover,
  s: Survey,
  ctx: DecideContext,
): Promise<RetireData | string> {
  const peer = provingPeer(wanted.interface, s.live);
  if (typeof peer === "string") return peer;
  const problem = retirePathProblem(t, s, ctx);
  if (problem) return problem;
  if (!overlayStateOf(ctx)) return "no state directory to record its retirement in";
  const original = t.kept ? await ctx.ports.originals.original(t.path) : null;
  if (!original || original.sha !== t.kept) return "its kept original does not verify, so the live one stays";
  return { path: t.path, peer: peer.publicKey, handshake: peer.latestHandshake };
}

/** The peer whose latest handshake proves the mesh's interface, or why none does yet: every report says which. */
export function provingPeer(
  iface: string,
  live: Live,
): { publicKey: string; latestHandshake: number } | string {
  if (live.kind === "unknown") return `wg does not answer (${live.reason})`;
  if (live.kind !== "up") return `${iface} is not up, so no handshake proves it`;
  const peer = live.dump.peers
    .filter((p) => p.latestHandshake > 0)
    .sort((a, b) => b.latestHandshake - a.latestHandshake)[0];
  return peer ?? `no peer has handshaken with ${iface} yet`;
}

/** Nothing is removed unless it is `<wireguard dir>/<if>.conf`, not a path the mesh writes, and not a link. */
function retirePathProblem(t: Takeover, s: Survey, ctx: DecideContext): string | null {
  if (interfaceNameProblem(t.interface) || t.path !== `${WIREGUARD_DIR}/${t.interface}.conf`)
    return `${t.path} is not ${WIREGUARD_DIR}/<interface>.conf`;
  if (t.path === s.path || ctx.declaredPaths.has(t.path)) return `${t.path} is a path the mesh writes`;
  return placeProblem(ctx.ports.root, t.path);
}

/** Remove the found configuration from where its unit reads it, its original verified and recorded first. */
export async function retire(
  r: RetireData,
  t: Takeover,
  wanted: OverlayResource,
  ctx: DecideContext,
): Promise<{ said: string; at?: string }> {
  const overlay = overlayStateOf(ctx);
  const keptNot = (why: string) => ({ said: `${t.interface}'s configuration kept: ${why}` });
  const original = await ctx.ports.originals.original(r.path);
  if (!original || original.sha !== t.kept) return keptNot("its kept original does not verify");
  const live = await readRegular(ctx.ports.root, r.path);
  if (typeof live === "string") return keptNot(live);
  if (!overlay) return keptNot("no state directory to record its retirement in");
  const at = new Date().toISOString();
  // recorded before anything is removed: a crash between the two still finds it retired
  const kept = await overlay.recordRetired(
    t.interface,
    { path: r.path, original: original.sha, at, by: wanted.interface, peer: r.peer },
    original.bytes,
  );
  if (live) await removeRegular(ctx.ports.root, r.path);
  await ctx.ports.originals.release(r.path);
  const when = new Date(r.handshake * 1000).toISOString();
  return {
    at,
    said: `${t.interface}'s configuration retired: peer ${r.peer.slice(0, 8)}… handshook with ${wanted.interface} at ${when}; ${r.path} ${live ? "removed" : "was already gone"}, its original kept at ${kept}`,
  };
}
