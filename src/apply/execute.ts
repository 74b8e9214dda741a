// Carrying out a planned apply's steps, one run at a time, each by the applier of its type, with what reads
// changes decided again as the apply reaches it (the same decision the plan used).
import type { Executed, RecordBase } from "../appliers/index.ts";
import { FILE_WRITE_CONCURRENCY } from "../defaults.ts";
import type { Host } from "../hosts/index.ts";
import type { ReportStep } from "../vocabulary/index.ts";
import { executeAdopted, isAdoptedStep } from "./adopted.ts";
import { type Decider, decider, noteChange } from "./decide.ts";
import { mapLimited } from "./map-limited.ts";
import type { RecordBook } from "./records.ts";
import { failureDetail, INTERRUPTED, type PlanInput, type PlannedStep, planLine } from "./steps.ts";
import { readsChanges, traitsOf } from "./traits.ts";

export interface Execution {
  /** The records as the steps leave them: each step's outcome is settled there. */
  book: RecordBook;
  /** Told each time a step is done, with how many of how many. */
  onStep?: (done: number, total: number) => void;
  signal?: AbortSignal;
  /** Steps whose found original could not be held (the journal's reason): failed, never carried out. */
  unheld?: ReadonlyMap<string, string>;
}

/**
 * Carry out the planned steps, one run at a time. A failed step whose applier says its failure stops the apply
 * (an action: a command whose effect later steps may need; the seeds' "stopped at the first failing action")
 * stops it, and the rest are not reached; any other failed step is reported failed and the apply goes on: a
 * later step that needs it reads the machine and fails in its own words, and every other step still brings
 * the node nearer the declaration.
 */
export async function execute(steps: PlannedStep[], input: PlanInput, run: Execution): Promise<ReportStep[]> {
  // decided against the records as the steps before have left them: `wrote` reads what was just written
  const d = decider(input, run.book);
  const changed = new Set<string>(input.owed ?? []);
  const made = new Set<string>();
  const out: ReportStep[] = [];
  const stop: { by?: string } = {};
  for (const batch of batches(input.host, steps)) {
    const first = batch[0]!;
    // what reads changes is decided again with what actually changed: the same function the plan used
    const fresh =
      first.wanted && readsChanges(input.host, first.wanted) && !run.signal?.aborted && !stop.by
        ? await d.decide(first.wanted, changed, made)
        : batch;
    const ctx = () => d.context(changed, made);
    const results = await mapLimited(fresh, FILE_WRITE_CONCURRENCY, (s) =>
      runOne(s, input.host, run, ctx, stop),
    );
    results.forEach((r, i) => {
      noteChange(fresh[i]!, r.did, changed, made);
      if (r.did === "failed" && traitsOf(input.host, fresh[i]!.type).stopsOnFailure) stop.by ??= r.id;
      out.push(r);
    });
    run.onStep?.(out.length, steps.length);
  }
  return out;
}

/** One step carried out by its type's applier, and what it came to; not reached once the apply stopped. */
async function runOne(
  step: PlannedStep,
  host: Host,
  run: Execution,
  ctx: () => ReturnType<Decider["context"]>,
  stop: { by?: string },
): Promise<ReportStep> {
  if (stop.by)
    return { ...planLine(step), did: "not-reached", detail: `not reached: action ${stop.by} failed` };
  if (run.signal?.aborted) return { ...planLine(step), did: "not-reached", detail: INTERRUPTED };
  const unheld = step.wanted && run.unheld?.get(step.id);
  if (unheld) return { ...planLine(step), did: "failed", detail: unheld };
  const { book } = run;
  if (isAdoptedStep(step))
    try {
      return recorded(step, await executeAdopted(host, step, ctx()), book);
    } catch (e) {
      return { id: step.id, type: step.type, did: "failed", detail: failureDetail(e, step) };
    }
  const applier = host.appliers.get(step.type)!;
  // an id that named something else until the removal just before: its new record is journalled now
  const intent = applier.traits?.journal?.(step).intent;
  if (intent && step.wanted && !step.record && book.intend(step.id, intent)) book.write();
  try {
    // the applier is told exactly the record its decision saw (a removal: the one it gives back)
    const record = step.wanted ? step.record : (step.record ?? book.now[step.id]);
    return recorded(step, await applier.execute(step, step.wanted, record, ctx()), book);
  } catch (e) {
    return { id: step.id, type: step.type, did: "failed", detail: failureDetail(e, step) };
  }
}

/** What a step came to, its record kept (or, for a removal, forgotten). */
function recorded(step: PlannedStep, done: Executed<RecordBase>, book: RecordBook): ReportStep {
  book.settle(step.id, done.record, !step.wanted);
  return { id: step.id, type: step.type, did: done.did, detail: done.detail };
}

/** Steps grouped so that consecutive file writes run side by side (their fsyncs overlap) and all else one at a time. */
function batches(host: Host, steps: PlannedStep[]): PlannedStep[][] {
  const out: PlannedStep[][] = [];
  const parallel = (s: PlannedStep) => traitsOf(host, s.type).writesFiles === true && s.wanted !== undefined;
  for (const s of steps) {
    const last = out.at(-1);
    if (last && parallel(s) && parallel(last[0]!)) last.push(s);
    else out.push([s]);
  }
  return out;
}
