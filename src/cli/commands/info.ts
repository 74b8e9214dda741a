// `status`: what this node holds.
import { moveInProgress, type Records } from "../../store/index.ts";
import type { Context } from "../context.ts";
import { writeJson, writeOut } from "../output.ts";
import { overlayStatus, overlayStatusLines } from "./overlay.ts";

export function statusDoc(ctx: Context) {
  const node = ctx.state.readNode();
  const membership = readMembershipSummary(ctx);
  const declared = ctx.state.readDeclared();
  return {
    node: node?.node ?? null,
    mode: node?.mode ?? null,
    host: ctx.host.kind,
    state: ctx.state.dir,
    bus: membership,
    declaration: declared
      ? { seq: declared.seq, digest: declared.digest, received_at: declared.received_at }
      : null,
    last: ctx.state.readLast(),
    holds: ctx.holds.list(),
    held: heldOf(ctx.state.readRecords().records),
    confirmed: ctx.state.readText("confirmed")?.trim() ?? null,
    outbox: ctx.state.list("outbox").filter((n) => n.endsWith(".json")).length,
    move: moveInProgress(ctx.state),
    overlay: ctx.host.appliers.has("overlay")
      ? overlayStatus(ctx.state.dir, ctx.state.readRecords().records)
      : null,
  };
}

/**
 * What an adopted node found running and holds until a declaration takes it (`takes: true`), by id: a held
 * record says so itself, and a container the mesh did not create is only ever recorded when it was held.
 */
function heldOf(records: Records): { id: string; type: string; name: string }[] {
  return Object.entries(records).flatMap(([id, r]) => {
    const rec = r as { type: string; held?: boolean; created?: boolean; unit?: string; name?: string };
    const held = rec.held === true || (rec.type === "container" && rec.created === false);
    return held ? [{ id, type: rec.type, name: rec.unit ?? rec.name ?? id }] : [];
  });
}

/** The bus a node is on, never its password. */
function readMembershipSummary(
  ctx: Context,
): { servers: string[]; user: string; fingerprint: string } | null {
  const text = ctx.state.readText("membership.json");
  if (!text) return null;
  try {
    const m = JSON.parse(text) as { membership?: { servers: string[]; user: string; fingerprint: string } };
    const { servers, user, fingerprint } =
      m.membership ?? (m as unknown as { servers: string[]; user: string; fingerprint: string });
    return { servers, user, fingerprint };
  } catch {
    return null;
  }
}

export function statusCommand(ctx: Context): number {
  const doc = statusDoc(ctx);
  if (ctx.args.json) {
    writeJson(doc);
    return 0;
  }
  const lines = [
    `node:        ${doc.node ?? "(no identity yet)"}`,
    `mode:        ${doc.mode ?? "(none recorded)"}`,
    `host:        ${doc.host}`,
    `state:       ${doc.state}`,
    `bus:         ${doc.bus ? `${doc.bus.servers.join(", ")} as ${doc.bus.user} (pinned ${doc.bus.fingerprint.slice(0, 16)}…)` : "(not enrolled)"}`,
    `declaration: ${doc.declaration ? `seq ${doc.declaration.seq}, sha256:${doc.declaration.digest.slice(0, 12)}` : "(none from the mesh)"}`,
    `last:        ${doc.last ? `${doc.last.outcome} at ${doc.last.at} (seq ${doc.last.seq})` : "(never applied)"}`,
    ...(doc.overlay
      ? overlayStatusLines(doc.overlay).map((l, i) => `${i ? " ".repeat(13) : "overlay:     "}${l}`)
      : []),
    `holds:       ${doc.holds.length ? doc.holds.map((h) => h.path).join(", ") : "(none)"}`,
    ...(doc.held.length
      ? [
          `held:        ${doc.held.map((h) => `${h.name} (${h.type} ${h.id})`).join(", ")}: as found, until taken`,
        ]
      : []),
    `confirmed:   ${doc.confirmed ? `sha256:${doc.confirmed.slice(0, 12)}` : "(not yet)"}`,
    `outbox:      ${doc.outbox} report(s) waiting`,
    ...(doc.move
      ? [
          `move:        to ${doc.move.to.join(", ")} since ${doc.move.started_at}; back to ${doc.move.from.join(", ")} if it will not hold`,
        ]
      : []),
  ];
  writeOut(lines.join("\n"));
  return 0;
}
