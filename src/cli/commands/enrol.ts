// `enrol` (the code on standard input, or --code-file F): make keys, ask the mesh, save the membership. The token
// is never printed.
import { hostFacts } from "../../hosts/index.ts";
import { ask } from "../../link/index.ts";
import {
  acquireLock,
  ensureKeys,
  forgetOrder,
  forgetSettled,
  makeKeyPair,
  type NodeKeys,
  publicKeys,
  saveKey,
} from "../../store/index.ts";
import { UsageError } from "../args.ts";
import type { Context } from "../context.ts";
import { writeJson, writeOut } from "../output.ts";
import { approachOf } from "./enrol-code.ts";

export async function enrolCommand(ctx: Context): Promise<number> {
  const code = await approachOf(ctx);
  const known = ctx.state.readNode();
  const replacing = enrolledAlready(ctx, code.node);
  const lock = await acquireLock(ctx.state.ensure().dir);
  try {
    // only an executable that carries the overlay looks for a tunnel to take (its root hands the part in)
    const found = ctx.host.appliers.has("overlay") ? await ctx.parts.tunnelAtEnrol?.(ctx) : undefined;
    const tunnel = found?.tunnel;
    const keys = replacing ? renewedKeys(ctx.state.dir) : ensureKeys(ctx.state.dir);
    if (!keys.ok) throw new UsageError(keys.reason);
    const answer = await ask(
      { servers: code.servers, fingerprint: code.fingerprint, transport: code.transport },
      {
        node: code.node,
        credential: "token" in code ? { token: code.token } : { jwt: code.jwt, seed: code.seed },
        keys: publicKeys(keys.keys),
        sealing: keys.keys.sealing.privateKey,
        facts: hostFacts(ctx.host.kind),
        ...(tunnel ? { tunnel } : {}),
      },
    );
    if (!answer.ok) {
      // the mesh's refusal and a code the bus refuses are refusals (exit 2); a bus not reached is a failure
      const refused = answer.kind === "refused" || answer.kind === "auth";
      ctx.log.warn(
        { node: code.node, kind: answer.kind },
        refused ? "enrolment refused" : "enrolment failed",
      );
      if (refused) throw new UsageError(answer.reason);
      process.stderr.write(`mesh-host: enrolment failed: ${answer.reason}\n`);
      return 1;
    }
    if (replacing) keepRenewed(ctx, keys.keys, answer.membership.mesh_key);
    ctx.state.writeMembership(answer.membership);
    ctx.state.writeNode({ node: code.node, mode: known?.mode ?? null });
    ctx.log.info({ node: code.node, servers: answer.membership.servers }, "enrolled");
    const doc = {
      node: code.node,
      user: answer.membership.user,
      servers: answer.membership.servers,
      tunnel: tunnel ?? null,
      ...(found?.interfaces ? { tunnels_found: found.interfaces } : {}),
    };
    if (ctx.args.json) writeJson(doc);
    else
      writeOut(
        [`enrolled ${doc.node} as ${doc.user} on ${doc.servers.join(", ")}`, ...(found?.lines ?? [])].join(
          "\n",
        ),
      );
    return 0;
  } finally {
    lock.release();
  }
}

/** The mesh now seals to these keys and knows the node by them: saved only once it has answered. */
function keepRenewed(ctx: Context, keys: NodeKeys, meshKey: string): void {
  saveKey(ctx.state.dir, "identity", keys.identity);
  saveKey(ctx.state.dir, "sealing", keys.sealing);
  forgetOrder(ctx.state, meshKey);
  forgetSettled(ctx.state, meshKey);
}

/** Whether this node is enrolled and --replace says to enrol it again; refused when it is and nothing says so. */
function enrolledAlready(ctx: Context, node: string): boolean {
  const known = ctx.state.readNode();
  if (known && known.node !== node)
    throw new UsageError(`this node is "${known.node}"; the code is for "${node}"`);
  if (!ctx.state.readMembership()) return false;
  if (ctx.args.replace) return true;
  throw new UsageError(
    "this node is already enrolled (its membership is saved): `mesh-host enrol --replace` enrols it again with new keys, keeping its records and holds, given a code from `mesh-host mesh node reissue NAME`; a move comes from the mesh",
  );
}

/**
 * `enrol --replace`: a new identity and sealing key, kept in memory until the mesh has answered (a refused
 * question leaves the node as it was); the overlay key stays, its tunnels with it.
 */
function renewedKeys(stateDir: string) {
  const kept = ensureKeys(stateDir);
  if (!kept.ok) return kept;
  const keys = { ...kept.keys, identity: makeKeyPair("ed25519"), sealing: makeKeyPair("x25519") };
  return { ok: true as const, keys };
}
