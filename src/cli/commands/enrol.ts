// `enrol` (the code on standard input, or --code-file F): make keys, ask the mesh, save the membership. The token
// is never printed.
import { arch, hostname } from "node:os";
import { meshInterfaces, facts as tunnelFacts } from "../../appliers/arch/overlay/index.ts";
import { BUILD } from "../../build-info.ts";
import { ask } from "../../link/asking.ts";
import { acquireLock, ensureKeys, overlayKeyFromB64, publicKeys, saveKey } from "../../store/index.ts";
import { type Found, findTunnel, type TunnelFacts } from "../../system/arch/index.ts";
import { localExec } from "../../system/index.ts";
import { UsageError } from "../args.ts";
import type { Context } from "../context.ts";
import { writeJson, writeOut } from "../output.ts";
import { approachOf } from "./enrol-code.ts";

export async function enrolCommand(ctx: Context): Promise<number> {
  const code = await approachOf(ctx);
  const known = ctx.state.readNode();
  if (known && known.node !== code.node)
    throw new UsageError(`this node is "${known.node}"; the code is for "${code.node}"`);
  if (ctx.state.readMembership())
    throw new UsageError(
      "this node is already enrolled (its membership is saved); a move comes from the mesh",
    );
  const lock = await acquireLock(ctx.state.ensure().dir);
  try {
    const found = await foundTunnel(ctx);
    const tunnel = found.kind === "one" ? takeKey(ctx, found) : undefined;
    const keys = ensureKeys(ctx.state.dir);
    if (!keys.ok) throw new UsageError(keys.reason);
    const answer = await ask(
      { servers: code.servers, fingerprint: code.fingerprint, transport: code.transport },
      {
        node: code.node,
        credential: "token" in code ? { token: code.token } : { jwt: code.jwt, seed: code.seed },
        keys: publicKeys(keys.keys),
        sealing: keys.keys.sealing.privateKey,
        facts: { os: ctx.host.kind, arch: arch(), hostname: hostname(), version: BUILD.version },
        ...(tunnel ? { tunnel } : {}),
      },
    );
    if (!answer.ok) {
      ctx.log.warn({ node: code.node, kind: answer.kind }, "enrolment refused");
      if (answer.kind === "refused") throw new UsageError(answer.reason);
      process.stderr.write(`mesh-host: enrolment failed: ${answer.reason}\n`);
      return 1;
    }
    ctx.state.writeMembership(answer.membership);
    ctx.state.writeNode({ node: code.node, mode: known?.mode ?? null });
    ctx.log.info({ node: code.node, servers: answer.membership.servers }, "enrolled");
    const doc = {
      node: code.node,
      user: answer.membership.user,
      servers: answer.membership.servers,
      tunnel: tunnel ?? null,
      ...(found.kind === "many" ? { tunnels_found: found.interfaces } : {}),
    };
    if (ctx.args.json) writeJson(doc);
    else
      writeOut(
        [
          `enrolled ${doc.node} as ${doc.user} on ${doc.servers.join(", ")}`,
          ...tunnelLines(found, tunnel),
        ].join("\n"),
      );
    return 0;
  } finally {
    lock.release();
  }
}

/** The WireGuard tunnels up besides the mesh's, where this host runs an overlay; none where it does not. */
async function foundTunnel(ctx: Context): Promise<Found> {
  if (!ctx.host.appliers.has("overlay")) return { kind: "none" };
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
