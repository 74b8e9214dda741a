// The overlay's part of `enrol`, on a host that carries it (the Arch root hands it in): a WireGuard tunnel up
// besides the mesh's is found, and exactly one has its private key taken as the node's overlay key.
import { meshInterfaces, facts as tunnelFacts } from "../../appliers/arch/overlay/index.ts";
import { overlayKeyFromB64, saveKey } from "../../store/index.ts";
import { type Found, findTunnel, type TunnelFacts } from "../../system/arch/index.ts";
import { localExec } from "../../system/index.ts";
import type { Context } from "../context.ts";
import type { TunnelAtEnrol } from "../parts.ts";

/** A tunnel found and taken, several found and none taken, or none: what enrol carries and says. */
export async function tunnelAtEnrol(ctx: Context): Promise<TunnelAtEnrol> {
  const found = await foundTunnel(ctx);
  const tunnel = found.kind === "one" ? takeKey(ctx, found) : undefined;
  return {
    ...(tunnel ? { tunnel } : {}),
    ...(found.kind === "many" ? { interfaces: found.interfaces } : {}),
    lines: tunnelLines(found, tunnel),
  };
}

/** The WireGuard tunnels up besides the mesh's. */
async function foundTunnel(ctx: Context): Promise<Found> {
  const found = await findTunnel(localExec(), ctx.args.root, meshInterfaces(ctx.state.readRecords().records));
  if (found.kind === "unknown")
    ctx.log.warn({ reason: found.reason }, "could not look for a WireGuard tunnel");
  return found;
}

/**
 * Exactly one tunnel up besides the mesh's: its private key becomes the node's overlay key (the one credential
 * the mesh takes rather than mints), saved where a made one is, never printed, never sent. Not enrolled yet,
 * so a key an earlier attempt made is replaced: only an answered question makes a key the mesh's.
 */
function takeKey(ctx: Context, found: Extract<Found, { kind: "one" }>): TunnelFacts | undefined {
  const pair = overlayKeyFromB64(found.found.privateKey);
  if (!pair) {
    ctx.log.warn(
      { interface: found.found.tunnel.interface },
      "the found tunnel's key is not a WireGuard key: not taken",
    );
    return undefined;
  }
  saveKey(ctx.state.ensure().dir, "overlay", pair);
  ctx.log.info({ interface: found.found.tunnel.interface }, "the overlay key is taken from the found tunnel");
  return found.found.tunnel;
}

function tunnelLines(found: Found, tunnel: TunnelFacts | undefined): string[] {
  if (tunnel)
    return [
      `took the overlay key of WireGuard interface ${tunnel.interface} (${tunnel.address || "no address"}; ${tunnelFacts(tunnel)}): the mesh composes from it`,
    ];
  if (found.kind === "many")
    return [
      `found ${found.interfaces.length} WireGuard interfaces (${found.interfaces.join(", ")}): none taken; \`mesh-host overlay take --tunnel <if>\` takes one`,
    ];
  return [];
}
