// `run`: hold the node in its mesh until stopped; exits 0 to be restarted onto a new binary or a new bus.

import { type LinkOptions, openBound } from "../../link/index.ts";
import {
  type BinaryAtStart,
  RunLoop,
  type RunLoopOptions,
  type UpgradeDeps,
  upgradeTo,
} from "../../run/index.ts";
import {
  beginMove,
  finishMove,
  keepSettled,
  loadIdentity,
  moveInProgress,
  Outbox,
  pendingNotes,
  RunRecord,
  returnFromMove,
  settledOf,
} from "../../store/index.ts";
import type { Membership } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { type Context, portsOf } from "../context.ts";
import { binariesAtStart, confirmBinary, runningBinary } from "./confirm.ts";

/** The node's membership, its name and the identity key it signs with; refused in one line without them. */
function enrolledOf(ctx: Context) {
  const membership = ctx.state.readMembership();
  const node = ctx.state.readNode();
  if (!membership || !node)
    throw new UsageError(
      `this node is not enrolled (no membership in ${ctx.state.dir}): run \`mesh-host enrol\` (the code on standard input) first`,
    );
  // what every report and heartbeat is signed with: a node that cannot sign would only be dropped by the mesh
  const identity = loadIdentity(ctx.state.dir);
  if (!identity.ok) throw new UsageError(`this node cannot sign what it says: ${identity.reason}`);
  return { membership, node, identity };
}

export async function runCommand(ctx: Context): Promise<number> {
  if (ctx.args.positionals.length) throw new UsageError("run takes no arguments");
  const { membership, node, identity } = enrolledOf(ctx);
  // the launcher names the installed path: after a rollback this process runs from a copy, which never changes
  const running = runningBinary();
  const binaries = binariesAtStart(running, process.env.MESH_HOST_BIN ?? running);
  const record = new RunRecord(ctx.state);
  const confirming = confirmation(ctx, binaries.running);
  const loop = new RunLoop({
    deps: {
      state: ctx.state,
      originals: ctx.originals,
      outbox: new Outbox(ctx.state),
      host: ctx.host,
      ports: portsOf(ctx),
      unseal: ctx.unseal,
      node: node.node,
      membership,
    },
    // signs what it says and, on a v2 membership, signs in with the identity key
    dial: () =>
      openBound(membership, node.node, identity.pair.privateKey, {
        ...settledMarks(ctx, membership),
        onDialled: (server) => ctx.log.debug({ server }, "dialled; binding"),
      }),
    log: ctx.log,
    heartbeatS: ctx.args.heartbeatS,
    driftS: ctx.args.driftS,
    redialSpreadS: ctx.args.redialSpreadS,
    binary: binaries.installed ?? undefined,
    upgrade: (version, source) =>
      upgradeTo(version, source, upgradeDeps(ctx, membership, binaries.installed)),
    onConfirmed: confirming.start,
    confirmed: confirming.done,
    notes: pendingNotes(ctx.state),
    onLink: (l) => record.link(l.up, l.up ? null : l.error),
    onHeartbeat: (at) => record.heartbeat(at),
    ...moveSteps(ctx, membership),
  });
  const stop = () => loop.stop();
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  ctx.log.info(
    { node: node.node, user: membership.user, servers: membership.servers },
    "holding the node in its mesh",
  );
  const why = await loop.run();
  await confirming.written(); // written before the exit, even when a stop came while the binary was hashed
  record.stopped();
  ctx.log.info({ why }, "exiting cleanly");
  return 0;
}

/**
 * `enrol --replace` ran while this process held the old membership (refused, most likely: the node was removed
 * or reissued): it exits 0, as after a move, for its service manager to start it on the new one.
 */
/**
 * The launcher's "confirmed" for the binary running now: started once the first reconcile completed, `done`
 * once its own digest is written (what a heartbeat says), `written` awaited before the exit.
 */
function confirmation(ctx: Context, running: BinaryAtStart | null) {
  let writing: Promise<void> = Promise.resolve();
  let done = false;
  return {
    start: () => {
      writing = confirmBinary(ctx.state, running).then(
        (ok) => {
          done = ok;
        },
        (e: Error) => ctx.log.warn({ err: e.message }, "the confirmation could not be written"),
      );
    },
    done: () => done,
    written: () => writing,
  };
}

function reEnrolled(ctx: Context, membership: Membership): boolean {
  const now = ctx.state.readMembership();
  if (!now || JSON.stringify(now) === JSON.stringify(membership)) return false;
  ctx.log.info({ servers: now.servers }, "enrolled again: exiting to be started on the new membership");
  return true;
}

/** What fetching and installing a release needs: the installed binary is what it replaces. */
function upgradeDeps(ctx: Context, membership: Membership, installed: BinaryAtStart | null): UpgradeDeps {
  return {
    state: ctx.state,
    kind: ctx.host.kind,
    meshKey: membership.mesh_key,
    exec: portsOf(ctx).exec,
    installed,
    log: ctx.log,
    // pacman -U, where this executable's root carries it (a release that is a package)
    ...(ctx.parts.installPackage ? { installPackage: ctx.parts.installPackage } : {}),
  };
}

/** A move to another bus as the run loop lives it: saved when declared, finished when heard there, undone when refused. */
function moveSteps(
  ctx: Context,
  membership: Membership,
): Pick<RunLoopOptions, "onMove" | "onDelivered" | "onDialFailed"> {
  return {
    onMove: (to) => {
      beginMove(ctx.state, to, membership);
      ctx.log.info({ to: to.servers }, "moving to another bus: exiting to be restarted onto it");
    },
    onDelivered: () => {
      if (moveInProgress(ctx.state)) finishMove(ctx.state);
    },
    onDialFailed: (reason) => {
      const move = moveInProgress(ctx.state);
      if (!move) return reEnrolled(ctx, membership) ? "stop" : "retry";
      if (Date.now() - Date.parse(move.started_at) < ctx.args.moveGraceS * 1000) return "retry";
      returnFromMove(ctx.state, reason);
      ctx.log.warn({ reason }, "the new bus would not hold this node: returning to the previous one");
      return "stop";
    },
  };
}

/**
 * Read directly, a node yields only what is newer than the last it settled, kept in its state (store/settled.ts):
 * read at each dial, kept at each settlement (the run loop settles once the report is in the outbox).
 */
function settledMarks(ctx: Context, membership: Membership): LinkOptions {
  return {
    settled: settledOf(ctx.state, membership.mesh_key),
    onSettled: (mark) => keepSettled(ctx.state, membership.mesh_key, mark),
  };
}
