// `run`: hold the node in its mesh until stopped; exits 0 to be restarted onto a new binary or a new bus.
import { Hold, type Link as HoldLink } from "../../hold/index.ts";
import { openLink } from "../../link/index.ts";
import { Outbox } from "../../store/index.ts";
import type { Membership } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { type Context, portsOf } from "../context.ts";
import { confirmBinary, rollbackNotes, runningBinary } from "./confirm.ts";

/** Dial, then bind: a link that cannot bind its consumer is no link (the mesh's to answer, said plainly). */
function dialler(membership: Membership, node: string) {
  return async (): Promise<HoldLink> => {
    const opened = await openLink(membership, node);
    if (!opened.ok) throw new Error(opened.reason);
    const link = opened.link;
    const bound = await link.bind();
    if (!bound.ok) {
      await link.close();
      throw new Error(bound.reason);
    }
    return {
      declarations: () => link.declarations(),
      async report(r) {
        const sent = await link.report(r);
        if (!sent.ok) throw new Error(sent.reason);
      },
      heartbeat: (h) => void link.heartbeat(h),
      close: () => link.close(),
    };
  };
}

export async function runCommand(ctx: Context): Promise<number> {
  if (ctx.args.positionals.length) throw new UsageError("run takes no arguments");
  const membership = ctx.state.readMembership();
  const node = ctx.state.readNode();
  if (!membership || !node)
    throw new UsageError(
      `this node is not enrolled (no membership in ${ctx.state.dir}): run \`mesh-host enrol CODE\` first`,
    );
  const binary = runningBinary();
  const hold = new Hold({
    deps: {
      state: ctx.state,
      holds: ctx.holds,
      outbox: new Outbox(ctx.state),
      host: ctx.host,
      ports: portsOf(ctx),
      unseal: ctx.unseal,
      node: node.node,
      membership,
    },
    dial: dialler(membership, node.node),
    log: ctx.log,
    heartbeatS: ctx.args.heartbeatS,
    driftS: ctx.args.driftS,
    binaryPath: binary ?? undefined,
    onConfirmed: () => confirmBinary(ctx.state, binary),
    notes: rollbackNotes(ctx.state),
  });
  const stop = () => hold.stop();
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  ctx.log.info(
    { node: node.node, user: membership.user, servers: membership.servers },
    "holding the node in its mesh",
  );
  const why = await hold.run();
  ctx.log.info({ why }, "exiting cleanly");
  return 0;
}
