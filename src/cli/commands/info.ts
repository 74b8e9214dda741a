// `status`: what this node holds, and whether all is well with it.
import { existsSync } from "node:fs";
import { holdsIn } from "../../apply/index.ts";
import { printable } from "../../printable.ts";
import {
  acceptedOf,
  type DeclaredFile,
  moveInProgress,
  Outbox,
  type RunFile,
  readRun,
} from "../../store/index.ts";
import type { Report } from "../../vocabulary/index.ts";
import type { Context } from "../context.ts";
import { writeJson, writeOut } from "../output.ts";
import type { OverlayShown } from "../parts.ts";

export function statusDoc(ctx: Context, overlay: OverlayShown | null) {
  const node = ctx.state.readNode();
  const membership = ctx.state.readBusSummary();
  const declared = ctx.state.readDeclared();
  const run = readRun(ctx.state);
  const outbox = new Outbox(ctx.state).pending();
  return {
    node: node?.node ?? null,
    mode: node?.mode ?? null,
    host: ctx.host.kind,
    state: ctx.state.dir,
    bus: membership,
    declaration: declared
      ? {
          serial: serialOfDeclared(ctx, declared),
          seq: declared.seq,
          digest: declared.digest,
          received_at: declared.received_at,
        }
      : null,
    last: lastOf(ctx, declared),
    report: reportSummary(ctx.state.readLastReport()),
    run: runSummary(run),
    link: membership ? linkOf(run) : null,
    heartbeat_at: run?.heartbeat_at ?? null,
    holds: ctx.originals.list(),
    // what an adopted node found and holds until a declaration takes it: the apply's one hold, for every kind
    held: holdsIn(ctx.host, ctx.state.readRecords().records),
    confirmed: ctx.state.readConfirmed(),
    outbox: outbox.length,
    outbox_oldest: outbox[0]?.report.finished_at ?? null,
    move: moveInProgress(ctx.state),
    overlay: overlay?.status ?? null,
  };
}

/** The serial the kept declaration was accepted at: what the operator's push said, not the stream's count. */
function serialOfDeclared(ctx: Context, declared: DeclaredFile): number | null {
  const accepted = declared.mesh_key ? acceptedOf(ctx.state, declared.mesh_key) : null;
  return accepted?.digest === declared.digest ? accepted.serial : null;
}

/** The last apply, with the serial it applied when that was the mesh's kept declaration (a file has none). */
function lastOf(ctx: Context, declared: DeclaredFile | null) {
  const last = ctx.state.readLast();
  if (!last) return null;
  const serial = declared && last.seq === declared.seq ? serialOfDeclared(ctx, declared) : null;
  return { ...last, serial };
}

/** The last apply's report, as much as says whether it failed and why: every failed step with its reason. */
function reportSummary(report: Report | null) {
  if (!report) return null;
  return {
    outcome: report.outcome,
    seq: report.declaration.seq,
    finished_at: report.finished_at,
    steps: report.steps.length,
    failed: report.steps
      .filter((s) => s.did === "failed")
      .map(({ id, type, detail }) => ({ id, type, detail })),
    not_reached: report.steps.filter((s) => s.did === "not-reached").length,
    notes: report.notes ?? [],
  };
}

function runSummary(run: (RunFile & { alive: boolean }) | null) {
  return run ? { alive: run.alive, pid: run.pid, since: run.since } : null;
}

/**
 * An enrolled node's link: up only while `run` is alive and said so; down since it went down (a clean exit says
 * so as it goes), or since an unknown time when `run` died with its link up: never since the time it came up.
 */
function linkOf(run: (RunFile & { alive: boolean }) | null) {
  if (!run) return { up: false, since: null, error: "mesh-host run has never run here" };
  if (!run.alive)
    return {
      up: false,
      since: run.link && !run.link.up ? run.link.since : null,
      error: `mesh-host run (pid ${run.pid}) is not running`,
    };
  if (!run.link) return { up: false, since: run.since, error: "not up yet: dialling" };
  return run.link;
}

/** Why `status` exits 1: the last apply failed, or an enrolled node's link is down. */
export function problemsOf(doc: ReturnType<typeof statusDoc>): string[] {
  const out: string[] = [];
  if (doc.report && doc.report.outcome === "failed") out.push("the last apply failed");
  else if (!doc.report && doc.last?.outcome === "failed") out.push("the last apply failed");
  if (doc.link && !doc.link.up) out.push("the link is down");
  return out;
}

/** A state directory that is not there holds no node: a typo in --state must not pass a monitoring check. */
function stateProblems(dir: string): string[] {
  return existsSync(dir)
    ? []
    : [`no state at ${dir}: mesh-host has never run here, or --state names the wrong directory`];
}

export async function statusCommand(ctx: Context): Promise<number> {
  // the overlay's account, where this host has one (its root hands the part in): from the state alone
  const overlay = ctx.host.appliers.has("overlay") ? ((await ctx.parts.overlayStatus?.(ctx)) ?? null) : null;
  const doc = statusDoc(ctx, overlay);
  const problems = [...stateProblems(ctx.state.dir), ...problemsOf(doc)];
  if (ctx.args.json) writeJson({ ...doc, ok: problems.length === 0, problems });
  // every line escaped: a step's detail and a report's notes may carry what a declaration or a tunnel said
  else
    writeOut(
      statusLines(doc, overlay?.lines ?? [], problems)
        .map((l) => printable(l))
        .join("\n"),
    );
  return problems.length ? 1 : 0;
}

// the serial is what a person reads (the operator's push said it); the stream's sequence is in --json alone
const serialWords = (serial: number | null) => (serial === null ? "serial unknown" : `serial ${serial}`);
const at = (label: string) => `${label}:`.padEnd(13);
/** Lines after the first of a field, under its value. */
const more = (lines: string[]) => lines.map((l, i) => (i ? `${" ".repeat(13)}${l}` : l));

function statusLines(doc: ReturnType<typeof statusDoc>, overlay: string[], problems: string[]): string[] {
  const r = doc.report;
  return [
    `${at("node")}${doc.node ?? "(no identity yet)"}`,
    `${at("mode")}${doc.mode ?? "(none recorded)"}`,
    `${at("host")}${doc.host}`,
    `${at("state")}${doc.state}`,
    `${at("bus")}${doc.bus ? `${doc.bus.servers.join(", ")} as ${doc.bus.user} (pinned ${doc.bus.fingerprint.slice(0, 16)}…)` : "(not enrolled)"}`,
    `${at("run")}${doc.run ? `${doc.run.alive ? "running" : "not running"}: pid ${doc.run.pid} since ${doc.run.since}` : "(never run here)"}`,
    ...(doc.link
      ? [
          `${at("link")}${doc.link.up ? `up since ${doc.link.since}` : `down${doc.link.since ? ` since ${doc.link.since}` : ""}: ${doc.link.error}`}`,
          `${at("heartbeat")}${doc.heartbeat_at ? `last sent at ${doc.heartbeat_at}` : "(none sent)"}`,
        ]
      : []),
    `${at("declaration")}${doc.declaration ? `${serialWords(doc.declaration.serial)}, sha256:${doc.declaration.digest.slice(0, 12)}` : "(none from the mesh)"}`,
    `${at("last")}${doc.last ? `${doc.last.outcome} at ${doc.last.at} (${doc.last.seq === 0 ? "a file" : serialWords(doc.last.serial)})` : "(never applied)"}`,
    ...(r?.failed.length
      ? more(r.failed.map((f) => `${f.id} (${f.type}): ${f.detail}`)).map((l, i) =>
          i ? l : `${at("failed")}${l}`,
        )
      : []),
    ...(r?.not_reached ? [`${at("not reached")}${r.not_reached} step(s) after the failure`] : []),
    ...(doc.overlay ? more(overlay).map((l, i) => (i ? l : `${at("overlay")}${l}`)) : []),
    `${at("holds")}${doc.holds.length ? doc.holds.map((h) => h.path).join(", ") : "(none)"}`,
    ...(doc.held.length
      ? [
          `${at("held")}${doc.held.map((h) => `${h.name} (${h.type} ${h.id})`).join(", ")}: as found, until taken`,
        ]
      : []),
    `${at("confirmed")}${doc.confirmed ? `sha256:${doc.confirmed.slice(0, 12)}` : "(not yet)"}`,
    `${at("outbox")}${doc.outbox} report(s) waiting${doc.outbox_oldest ? `, the oldest from ${doc.outbox_oldest}` : ""}`,
    ...(doc.move
      ? [
          `${at("move")}to ${doc.move.to.join(", ")} since ${doc.move.started_at}; back to ${doc.move.from.join(", ")} if it will not hold`,
        ]
      : []),
    `${at("health")}${problems.length ? problems.join("; ") : "ok"}`,
  ];
}
