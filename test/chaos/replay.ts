// Issue 18, replayed and reordered envelopes: the mesh signs a rising order of declarations, and a generated
// schedule publishes them on the node's subject through a real nats-server, as anyone able to publish there
// could (no mesh key needed): fresh ones, exact replays of older ones' bytes, bursts out of order. Whatever the
// schedule, the node only moves forward: an older serial is refused naming both, nothing it held goes back.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { MeshDouble } from "../mesh/index.ts";
import { EVENT_WAIT_MS } from "../support/events.ts";
import { BusNode, withMesh } from "./bus.ts";
import { type Outcome, type RunOptions, rng, type Scenario, sha, sleep, Tally } from "./support.ts";

const PATH = "/srv/order/conf";

interface Signed {
  serial: number;
  bytes: Uint8Array;
  digest: string;
}

/** Publish a fresh one (the next serial), or the exact bytes of one signed before. */
type Pick = { fresh: true } | { fresh: false; index: number };
type Step = { kind: "one"; pick: Pick } | { kind: "burst"; picks: Pick[] };

const content = (serial: number) => `serial ${serial}\n`;

/** A schedule of `n` steps: about a third fresh, a third replays, a third bursts of two or three, any order. */
export function schedule(random: () => number, n: number): Step[] {
  const pick = (): Pick =>
    random() < 0.4 ? { fresh: true } : { fresh: false, index: Math.floor(random() * 1e6) };
  return Array.from({ length: n }, (): Step => {
    const r = random();
    if (r < 0.35) return { kind: "one", pick: { fresh: true } };
    if (r < 0.7) return { kind: "one", pick: { fresh: false, index: Math.floor(random() * 1e6) } };
    return { kind: "burst", picks: Array.from({ length: 2 + Math.floor(random() * 2) }, pick) };
  });
}

/** One node's life under one schedule: what the mesh signed, and the highest serial the node must hold. */
class Life {
  readonly signed: Signed[] = [];
  kept = 0;
  /** Reports already checked. */
  seen = 0;

  constructor(
    readonly mesh: MeshDouble,
    readonly node: BusNode,
  ) {}

  /** The envelope a pick names: a fresh one is signed now with the next serial; an old one by its index. */
  envelope(p: Pick): Signed {
    if (!p.fresh && this.signed.length) return this.signed[p.index % this.signed.length]!;
    const serial = this.signed.length + 1;
    const body = {
      v: 1,
      node: this.node.name,
      serial,
      mode: "converged",
      resources: [{ id: "conf", type: "file", path: PATH, content: content(serial), mode: "0644" }],
    };
    const envelope = this.mesh.sign(this.node.name, body);
    const signed = { serial, bytes: Buffer.from(JSON.stringify(envelope)), digest: sha(envelope.body) };
    this.signed.push(signed);
    return signed;
  }

  /** Publish a step's envelopes back to back, wait until the node settled them all, and judge what it did. */
  async take(step: Step): Promise<string[]> {
    const sent = (step.kind === "one" ? [step.pick] : step.picks).map((p) => this.envelope(p));
    const before = this.kept;
    for (const s of sent) await this.mesh.publishEnvelope(this.node.name, s.bytes);
    const unsettled = await this.settled();
    if (unsettled) return [unsettled];
    const problems = this.judgeReports();
    const last = sent.at(-1)!;
    // the stream keeps the last per subject: the last one sent is always delivered; the others may be replaced
    const floor = Math.max(before, last.serial);
    const ceiling = Math.max(before, ...sent.map((s) => s.serial));
    if (this.kept < floor || this.kept > ceiling)
      problems.push(
        `held serial ${this.kept} after sending ${sent.map((s) => s.serial).join(",")} on ${before}`,
      );
    problems.push(...this.machineSays());
    return problems;
  }

  /**
   * Every report in the order the node made them: an applied one never older than one applied before it, a
   * refused one older than the newest accepted and naming both serials. A superseded one changes nothing.
   */
  private judgeReports(): string[] {
    const problems: string[] = [];
    const bySerial = new Map(this.signed.map((s) => [s.digest, s.serial]));
    for (const r of this.node.reports().slice(this.seen)) {
      this.seen++;
      const report = r.value;
      const serial = report ? bySerial.get(report.declaration.digest) : undefined;
      if (!report || serial === undefined) {
        problems.push(`a report the schedule did not cause: ${r.problem ?? report?.declaration.digest}`);
        continue;
      }
      if (report.outcome === "applied") {
        if (serial < this.kept) problems.push(`serial ${serial} applied after ${this.kept}`);
        this.kept = Math.max(this.kept, serial);
      } else if (report.outcome === "refused") {
        const want = `serial ${serial} is older than ${this.kept}, the newest accepted`;
        if (report.refusals[0]?.reason !== want)
          problems.push(`serial ${serial} refused as ${JSON.stringify(report.refusals)}, not "${want}"`);
      } else if (report.outcome !== "superseded") problems.push(`serial ${serial}: ${report.outcome}`);
    }
    return problems;
  }

  /** The file says the newest accepted serial, and so does the order the node keeps. */
  private machineSays(): string[] {
    if (!this.kept) return [];
    const problems: string[] = [];
    const says = this.node.fileText(PATH);
    if (says !== content(this.kept))
      problems.push(`${PATH} says ${JSON.stringify(says)}, not serial ${this.kept}`);
    const order = JSON.parse(readFileSync(join(this.node.state, "order.json"), "utf8")) as {
      meshes: Record<string, { serial: number }>;
    };
    const kept = order.meshes[this.mesh.meshKey.publicB64]?.serial;
    if (kept !== this.kept) problems.push(`order.json keeps serial ${kept}, not ${this.kept}`);
    return problems;
  }

  /**
   * Settled: the last declaration on its subject settled (the node reads directly), nothing in its outbox, and every report the
   * REPORTS stream took for it received by the double. An event, never a pause; a string says what hung.
   */
  private async settled(): Promise<string | null> {
    const subject = `mesh.report.${this.node.name}`;
    const deadline = performance.now() + EVENT_WAIT_MS;
    let last = "";
    while (performance.now() < deadline) {
      // read in the order the node moves: the report is in the outbox before it is settled, and leaves it only once
      // the stream has it; so settled, then an empty outbox, then the stream's count cannot be a stale mix (read
      // the outbox last and a report flushed meanwhile is in neither the count nor the outbox)
      const declared = (await this.mesh.declared(this.node.name)).lastSeq ?? 0;
      const settled = this.node.settledSeq(this.mesh.meshKey.publicB64);
      const outbox = this.node.outbox().length;
      const stream = await this.mesh.jsm.streams.info("REPORTS", { subjects_filter: subject });
      const kept = stream.state.subjects?.[subject] ?? 0;
      const got = this.node.reports().length;
      last = `settled ${settled} of ${declared}, outbox ${outbox}, reports ${got}/${kept}`;
      if (settled >= declared && !outbox && got === kept) return null;
      await sleep(20);
    }
    return `the node did not settle within ${EVENT_WAIT_MS} ms (${last})`;
  }
}

export const replayed: Scenario = {
  key: "replay",
  title: "replayed and reordered envelopes (generated): the node only moves forward",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const random = rng(opts.seed ^ 0x5e71a1);
    const [lives, steps] = opts.long ? [6, 16] : [2, 6];
    await withMesh(async (mesh) => {
      for (let n = 0; n < lives; n++) {
        const node = await BusNode.enrolled(mesh, `replay${n}`);
        const life = new Life(mesh, node);
        await node.start();
        try {
          for (const [i, step] of schedule(random, steps).entries())
            await tally.try(`seed ${opts.seed}, node ${n}, step ${i} (${step.kind})`, () => life.take(step));
        } finally {
          const stopped = await node.stop();
          await tally.try(`seed ${opts.seed}, node ${n}: run exits 0 on SIGTERM`, () => stopped);
        }
        opts.progress?.(
          `replay: node ${n + 1}/${lives}, ${life.signed.length} signed, serial ${life.kept} held`,
        );
      }
    });
    return tally.outcome();
  },
};
