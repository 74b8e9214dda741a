// The run loop: dial, hear, apply one step at a time, report, heartbeat, look for drift; exit cleanly to be restarted.

import type { Logger } from "../appliers/index.ts";
import { applyDelivered, applyKept, CHANGING, type NodeParts, planAsked } from "../apply/index.ts";
import { BUILD } from "../build-info.ts";
import { UPGRADE_CHECK_MS, UPGRADE_SETTLE_MS, WORKING_ACK_INTERVAL_MS } from "../defaults.ts";
import type { Delivered, Link, ReleaseSource, Settled } from "../link/index.ts";
import type { Outbox, PendingNotes } from "../store/index.ts";
import type { Membership, Report } from "../vocabulary/index.ts";
import { backoffMs } from "./backoff.ts";
import { heartbeatNow } from "./beat.ts";
import { type BinaryAtStart, digestOfFile, fileStamp } from "./binary.ts";
import { sayLost } from "./lost.ts";
import { type Upgraded, withStep } from "./upgrade.ts";

/** The node's parts an apply is handed, and the outbox its reports wait in. */
export type NodeDeps = NodeParts & { outbox: Outbox };

/**
 * What the run loop uses of a link (link/link.ts): hearing and saying, each answered as a value; it never knows the
 * transport. A link that takes no plan requests, or reads no releases, leaves those out.
 */
export type LinkPort = Pick<Link, "declarations" | "report" | "heartbeat" | "close"> &
  Partial<Pick<Link, "plans" | "releases">>;

/** A dial answered: the link, or why there is none (refused, unreachable, its consumer missing). */
export type LinkOpened = { ok: true; link: LinkPort } | { ok: false; reason: string; kind?: string };
export type Dial = () => Promise<LinkOpened>;

export interface RunLoopOptions {
  deps: NodeDeps;
  dial: Dial;
  log: Logger;
  heartbeatS: number;
  driftS: number;
  /** The window of the first redial after a lost link (defaults.ts REDIAL_SPREAD_S). */
  redialSpreadS: number;
  /** The installed binary as it started: when pacman replaces it, the host finishes its step and exits 0 for the new one. */
  binary?: BinaryAtStart;
  /** The release a verified declaration names fetched, verified and swapped in (upgrade.ts), or why not. */
  upgrade?: (version: string, source: ReleaseSource) => Promise<Upgraded>;
  /** Called once the first reconcile completed: the launcher's "confirmed". */
  onConfirmed?: () => void;
  /** Whether the binary running now is confirmed (its own digest written): what a heartbeat's `confirmed` says. */
  confirmed?: () => boolean;
  /** Notes to carry in the first report (the launcher's rollback note, a failed move), cleared once it is kept. */
  notes?: PendingNotes;
  /** A declaration moved the node to another bus: save it; the run loop then exits 0 to be restarted onto it. */
  onMove?: (to: Membership) => void;
  /** A declaration was delivered and settled on this bus (a move is then complete). */
  onDelivered?: () => void;
  /** Dialling failed: "stop" ends the run loop (exit 0, restarted onto a bus the callee chose), else try again. */
  onDialFailed?: (reason: string) => "retry" | "stop";
  /** The link came up, or went down (and why): what `status` shows of it. */
  onLink?: (state: { up: true } | { up: false; error: string }) => void;
  /** A heartbeat was sent, at this time. */
  onHeartbeat?: (at: string) => void;
}

export type ExitReason = "stopped" | "upgraded" | "moved";

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const t = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

export class RunLoop {
  private readonly stopping = new AbortController();
  private link: LinkPort | null = null;
  private work: Promise<unknown> = Promise.resolve();
  private exitReason: ExitReason = "stopped";
  private readonly started = Date.now();
  private binaryStamp = "";
  private settling = { stamp: "", since: 0 };
  /** The look for an upgrade in progress (it may hash the new binary): the timer and the loop share it. */
  private lookingForUpgrade: Promise<boolean> | null = null;
  private notes: string[];
  /** A bus to move to once this step's report is out. */
  private pendingMove: Membership | null = null;
  /** The last dial's credentials were refused, and that was said. */
  private refusedSaid = false;
  /** The release the kept declaration names; a release installed (exit once its report is out); ones refused. */
  private wantedRelease: string | null = null;
  private pendingUpgrade = false;
  private readonly refusedReleases = new Set<string>();

  constructor(private readonly o: RunLoopOptions) {
    this.notes = [...(o.notes?.notes ?? [])];
    if (o.binary) this.binaryStamp = o.binary.stamp;
  }

  /** Finish the step in progress, flush the outbox, close the link; `run` then resolves. */
  stop(reason: ExitReason = "stopped"): void {
    if (!this.stopping.signal.aborted) this.exitReason = reason;
    this.stopping.abort();
    void this.link?.close().catch(() => {});
  }

  get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  async run(): Promise<ExitReason> {
    await this.serial(() => this.reconcileKept("start"));
    this.o.onConfirmed?.();
    // drift is looked for whether or not the bus is there: its report waits in the outbox
    const drift = setInterval(
      () => void this.serial(() => this.reconcileKept("drift")),
      this.o.driftS * 1000,
    );
    // an upgrade lands whether or not a declaration comes: the step in progress finishes first
    const upgrade = setInterval(
      () => void this.upgraded().then((yes) => yes && this.stop("upgraded")),
      UPGRADE_CHECK_MS,
    );
    try {
      await this.dialLoop();
    } finally {
      clearInterval(drift);
      clearInterval(upgrade);
    }
    await this.work;
    return this.exitReason;
  }

  private async dialLoop(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      await sleep(backoffMs(attempt, Math.random, this.o.redialSpreadS * 1000), this.stopping.signal);
      if (this.stopped) break;
      if (await this.oneLink(attempt)) attempt = 0;
      attempt++;
    }
  }

  /** One dial and, when it answers, that link's life; whether the link came up. */
  private async oneLink(attempt: number): Promise<boolean> {
    let up = false;
    try {
      this.o.log.debug({ attempt, servers: this.o.deps.membership.servers }, "dialling the bus");
      const dialled = await this.o.dial();
      if (!dialled.ok) {
        this.lost(dialled.reason, dialled.kind === "auth");
        return false;
      }
      this.link = dialled.link;
      up = true;
      this.refusedSaid = false;
      this.o.log.info({ attempt: 0 }, "link up");
      this.o.onLink?.({ up: true });
      const lost = await this.hear(dialled.link);
      if (lost !== null) this.lost(lost);
      else if (!this.stopped) this.o.onLink?.({ up: false, error: "the bus closed the link" });
    } catch (e) {
      this.lost((e as Error).message);
    } finally {
      await this.link?.close().catch(() => {});
      this.link = null;
    }
    return up;
  }

  /** A link refused or lost (and why): said (lost.ts), shown to `status`, and asked whether to go on dialling. */
  private lost(reason: string, credentialsRefused = false): void {
    sayLost(this.o.log, reason, credentialsRefused, this.refusedSaid);
    this.refusedSaid = credentialsRefused;
    this.o.onLink?.({ up: false, error: reason });
    if (this.o.onDialFailed?.(reason) === "stop") this.stop("moved");
  }

  /**
   * One link's life: flush what waited, heartbeats and drift on timers, declarations as they come. Null when it
   * ended as links do (closed, stopped, moved, upgraded); why, when a delivery could not be settled on it.
   */
  private async hear(link: LinkPort): Promise<string | null> {
    await this.flush(link);
    // one step at a time, as an apply is: a plan never reads a machine an apply is halfway through
    link.plans?.((request) => this.serial(() => planAsked(this.o.deps, request)));
    await this.serial(() => this.resumeRelease(link));
    const beat = () => {
      const h = heartbeatNow(this.o.deps, this.started, this.o.confirmed?.() ?? false);
      link.heartbeat(h);
      this.o.log.debug({ last: h.last?.outcome ?? null }, "heartbeat sent");
      this.o.onHeartbeat?.(h.at);
      // a report the bus refused (a stream leader changing) waits no longer than a heartbeat while the link holds
      if (this.reportsWaiting) void this.serial(() => this.flush(link));
    };
    beat();
    const heartbeats = setInterval(beat, this.o.heartbeatS * 1000);
    try {
      // a release installed on this link's first look: its report is out, nothing more is heard
      for await (const d of this.pendingUpgrade ? [] : link.declarations()) {
        const settled = await this.serial(() => this.settle(d));
        if (!settled.ok) return settled.reason;
        await this.flush(link);
        if (this.pendingMove || this.pendingUpgrade || (await this.upgraded())) break;
        if (this.stopped) break;
      }
    } finally {
      clearInterval(heartbeats);
    }
    if (this.pendingMove) {
      this.o.onMove?.(this.pendingMove);
      this.stop("moved");
    } else if (this.pendingUpgrade || (await this.upgraded())) this.stop("upgraded");
    return null;
  }

  /** One step at a time: deliveries and drift checks never overlap. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.work.then(fn, fn);
    this.work = next.catch(() => {});
    return next;
  }

  /**
   * Newest wins, decided here and only here: with a newer declaration pulled behind it, a delivery is superseded,
   * settled exactly as an applied one is (acked, and reported as such). A count that said one waits while none came
   * is not enough (link.ts): the one in hand is the newest and is applied. A refused one is terminated, so it is
   * never redelivered; either only once its report is safely in the outbox.
   */
  private async settle(d: Delivered): Promise<Settled> {
    const superseded = d.newer !== null;
    if (!superseded)
      this.o.log.debug(
        { seq: d.seq, bytes: d.data.length, ...(d.claimed ? { claimed: d.claimed } : {}) },
        "declaration heard: verifying and applying it",
      );
    const alive = setInterval(() => d.working(), WORKING_ACK_INTERVAL_MS);
    const applied = await applyDelivered(this.o.deps, { seq: d.seq, data: d.data, superseded })
      .then(async (a) => {
        if (a.report.outcome !== "applied" && a.report.outcome !== "failed") return a;
        this.wantedRelease = a.release ?? null;
        const step = await this.releaseStep(true);
        return step ? { ...a, report: withStep(a.report, step) } : a;
      })
      .finally(() => clearInterval(alive));
    this.putReport(applied.report);
    const settled = applied.report.outcome === "refused" ? await d.term() : await d.ack();
    if (!settled.ok) return settled;
    if (superseded) {
      this.o.log.info({ seq: d.seq, newer: d.newer }, "declaration superseded by a newer one");
      return settled;
    }
    if (applied.moveTo) this.pendingMove = applied.moveTo;
    this.o.onDelivered?.();
    this.logSettled("declaration settled", applied.report, { seq: d.seq });
    return settled;
  }

  /** The kept declaration again: at start (the reconcile that confirms) and on the drift timer; said only if it did something. */
  private async reconcileKept(why: "start" | "drift"): Promise<void> {
    const applied = await applyKept(this.o.deps);
    if (!applied) return;
    const { report } = applied;
    this.wantedRelease = applied.release ?? null;
    const did = report.outcome !== "applied" || report.steps.some((s) => CHANGING.has(s.did));
    if (did || this.notes.length) this.putReport(report);
    this.logSettled("reconciled the kept declaration", report, { why, changed: did });
    if (why === "drift" && this.link) await this.flush(this.link);
  }

  /**
   * The named release, when it is not this build's: fetched, verified and installed through the link (upgrade.ts),
   * its step for the report; null when there is nothing to do. A release refused in this process is tried again
   * only when a declaration names it again (`named`), never on every link.
   */
  private async releaseStep(named: boolean): Promise<Upgraded["step"] | null> {
    const version = this.wantedRelease;
    const source = this.link?.releases?.();
    if (!version || version === BUILD.version || !source || !this.o.upgrade) return null;
    if (!named && this.refusedReleases.has(version)) return null;
    const done = await this.o.upgrade(version, source).catch(
      (e: Error): Upgraded => ({
        step: {
          id: "host.release",
          type: "release",
          did: "failed",
          detail: `release ${version}: ${e.message}`,
        },
        restart: false,
      }),
    );
    if (done.refusedObject) this.refusedReleases.add(version);
    else this.refusedReleases.delete(version);
    if (done.restart) this.pendingUpgrade = true;
    if (done.step.did === "failed")
      this.o.log.warn({ release: version, err: done.step.detail }, "release not installed");
    return done.step;
  }

  /** On a link up: a release the kept declaration names and this host does not run yet, fetched (or resumed). */
  private async resumeRelease(link: LinkPort): Promise<void> {
    const step = await this.releaseStep(false);
    const last = this.o.deps.state.readLastReport();
    if (!step || step.did === "unchanged" || !last) return;
    this.putReport(withStep({ ...last, steps: [], notes: undefined }, step));
    await this.flush(link);
  }

  /** An apply's end: info when applied, warn naming each failed step (id and reason) when not. */
  private logSettled(msg: string, report: Report, extra: object): void {
    const { outcome } = report;
    if (outcome === "applied" || outcome === "superseded")
      return void this.o.log.info({ ...extra, outcome }, msg);
    const failed = report.steps.filter((s) => s.did === "failed").map((s) => `${s.id}: ${s.detail}`);
    const refused = report.refusals.map((r) => `${r.id} ${r.field}: ${r.reason}`);
    this.o.log.warn(
      { ...extra, outcome, ...(failed.length ? { failed } : {}), ...(refused.length ? { refused } : {}) },
      msg,
    );
  }

  /** Into the outbox, carrying the notes not yet said; once it is there, the notes are said. */
  private putReport(report: Report): void {
    if (!this.notes.length) {
      this.o.deps.outbox.put(report);
      return;
    }
    this.o.deps.outbox.put({ ...report, notes: [...this.notes, ...(report.notes ?? [])] });
    this.notes = [];
    this.o.notes?.clear();
  }

  /** Waiting reports, in order; one the bus does not take stays for the next link. */
  private async flush(link: LinkPort): Promise<void> {
    let waits: string | null;
    try {
      waits = await this.o.deps.outbox.flush(async (r) => {
        const sent = await link.report(r);
        if (sent.ok) this.o.log.debug({ seq: r.declaration.seq, outcome: r.outcome }, "report sent");
        return sent;
      });
    } catch (e) {
      waits = (e as Error).message;
    }
    this.reportsWaiting = waits !== null;
    if (waits !== null) this.o.log.warn({ err: waits }, "a report waits in the outbox");
  }

  /** Set when a flush stopped at a report the bus did not take. */
  private reportsWaiting = false;

  /** Whether pacman replaced the binary; one look at a time, since a replaced binary is hashed. */
  private upgraded(): Promise<boolean> {
    // a binary that cannot be read now is looked at again on the next tick
    this.lookingForUpgrade ??= this.replacedBinary()
      .catch(() => false)
      .finally(() => {
        this.lookingForUpgrade = null;
      });
    return this.lookingForUpgrade;
  }

  /**
   * The installed binary is no longer the one this process started as: pacman replaced it. Said only once the
   * new file has stood still for a moment, so the host never restarts onto a half-written binary. The same
   * contents put there again (a reinstall) are no upgrade; contents this process can no longer know are one.
   */
  private async replacedBinary(): Promise<boolean> {
    const binary = this.o.binary;
    if (!binary) return false;
    const stamp = fileStamp(binary.path);
    if (stamp === this.binaryStamp || stamp === "gone") return false;
    if (stamp !== this.settling.stamp) {
      this.settling = { stamp, since: Date.now() };
      return false;
    }
    if (Date.now() - this.settling.since < UPGRADE_SETTLE_MS) return false;
    const [was, now] = await Promise.all([binary.digest(), digestOfFile(binary.path)]);
    // moved again while it was hashed: not settled yet, the next look starts over
    if (now === null || fileStamp(binary.path) !== stamp) return false;
    if (now === was) {
      this.binaryStamp = stamp;
      return false;
    }
    return true;
  }
}
