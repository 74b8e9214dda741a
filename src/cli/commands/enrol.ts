// `enrol CODE` (or the per-part flags): make keys, ask the mesh, save the membership. The token is never printed.
import { arch, hostname } from "node:os";
import { BUILD } from "../../build-info.ts";
import { ask } from "../../link/asking.ts";
import { decodeCode } from "../../link/code.ts";
import { acquireLock, ensureKeys, publicKeys } from "../../store/index.ts";
import { EnrolmentCode } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import type { Context } from "../context.ts";
import { writeJson, writeOut } from "../output.ts";

/** The code's parts, from the code or from the flags, refused naming the part that is wrong. */
function approachOf(ctx: Context): EnrolmentCode {
  const [code, ...extra] = ctx.args.positionals;
  if (extra.length) throw new UsageError("enrol takes one CODE");
  if (code) {
    const decoded = decodeCode(code);
    if (!decoded.ok) throw new UsageError(`enrolment code: ${decoded.reason}`);
    return decoded.value;
  }
  const { node, server, fingerprint, token } = ctx.args;
  const parsed = EnrolmentCode.safeParse({ node, servers: server, fingerprint, transport: "nats", token });
  if (!parsed.success) {
    const field = String(parsed.error.issues[0]?.path[0] ?? "code");
    const flag = field === "servers" ? "server" : field;
    throw new UsageError(
      `enrol needs a CODE or --${flag}: ${field === "token" ? "missing" : (parsed.error.issues[0]?.message ?? "invalid")}`,
    );
  }
  return parsed.data;
}

export async function enrolCommand(ctx: Context): Promise<number> {
  const code = approachOf(ctx);
  const known = ctx.state.readNode();
  if (known && known.node !== code.node)
    throw new UsageError(`this node is "${known.node}"; the code is for "${code.node}"`);
  if (ctx.state.readMembership())
    throw new UsageError(
      "this node is already enrolled (its membership is saved); a move comes from the mesh",
    );
  const lock = await acquireLock(ctx.state.ensure().dir);
  try {
    const keys = ensureKeys(ctx.state.dir);
    if (!keys.ok) throw new UsageError(keys.reason);
    const answer = await ask(
      { servers: code.servers, fingerprint: code.fingerprint, transport: code.transport },
      {
        node: code.node,
        token: code.token,
        keys: publicKeys(keys.keys),
        facts: { os: ctx.host.kind, arch: arch(), hostname: hostname(), version: BUILD.version },
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
    const doc = { node: code.node, user: answer.membership.user, servers: answer.membership.servers };
    if (ctx.args.json) writeJson(doc);
    else writeOut(`enrolled ${doc.node} as ${doc.user} on ${doc.servers.join(", ")}`);
    return 0;
  } finally {
    lock.release();
  }
}
