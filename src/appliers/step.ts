// Building an applier's steps and carrying them out by action: the one place a step's action meets its data.
import { errnoWords } from "../faults.ts";
import type { DecideContext, Executed, Executors, Step, StepFor } from "./types.ts";

/**
 * A step builder for one resource type: its decisions read as `step(id, did, action, detail, data?, field?)`.
 * Given the applier's union `S`, `action` must be one of it and the step built is that member.
 */
export function stepsOf<S extends Step = Step>(type: string) {
  return <A extends S["action"]>(
    id: string,
    did: Step["did"],
    action: A,
    detail: string,
    data?: StepFor<S, A>["data"],
    field?: string,
  ): StepFor<S, A> => {
    const built: Step = {
      id,
      type,
      did,
      action,
      detail,
      ...(data === undefined ? {} : { data }),
      ...(field ? { field } : {}),
    };
    // the one place a step is put together: the union's member for `action`, with the data it was given
    return built as StepFor<S, A>;
  };
}

/** What giving back one the host had, held and never touched, says: nothing of it is the mesh's to undo. */
export const leftAsFound = (what: string): string =>
  `${what} left as it was found: it was held, never the mesh's`;

/** A step that failed with the record kept as it was (null when there was none): nothing the host owes is lost. */
export function failedKeeping<Rec>(detail: string, record: Rec | undefined): Executed<Rec> {
  return { did: "failed", detail, record: record ?? null };
}

/**
 * What a throw while a step was carried out says: its message's first line, a raw errno ("ENOSPC: no space
 * left on device, write") in our words; an error of ours already says its path and cause.
 */
export function thrownLine(e: unknown): string {
  const message = (e instanceof Error ? e.message : String(e)).split("\n")[0]!;
  const code = e instanceof Error && "code" in e && typeof e.code === "string" ? e.code : undefined;
  if (code && message.startsWith(`${code}:`)) return errnoWords(code);
  return message;
}

/** The executor of a step its decision failed (`fail`, `refuse`): it fails again, touching nothing. */
export async function failsAgain<Rec>(
  s: Step,
  _wanted: unknown,
  record: Rec | undefined,
): Promise<Executed<Rec>> {
  return failedKeeping(s.detail, record);
}

/** The executor of a step that finds all as declared (`none`): nothing is touched, the record stays. */
export async function keeps<Rec>(s: Step, _wanted: unknown, record: Rec | undefined): Promise<Executed<Rec>> {
  return { did: s.did, detail: s.detail, record: record ?? null };
}

/** The executor of a step that only drops the record (`forget`): what is on the machine is left as it is. */
export async function forgets<Rec>(s: Step): Promise<Executed<Rec>> {
  return { did: s.did, detail: s.detail, record: null };
}

/** A step whose data carries the record its decision wrote. */
type Recording<Rec> = Pick<Step, "did" | "detail"> & { data: { record: Rec } };

/** The executor of a step that touches nothing and keeps the record its decision wrote (what was found, held). */
export async function recorded<Rec>(s: Recording<Rec>): Promise<Executed<Rec>> {
  return { did: s.did, detail: s.detail, record: s.data.record };
}

/**
 * An applier's `execute` from its table of executors, one per action: the step goes to its action's executor.
 * A step of an action the table lacks (a journal written by another version) fails, touching nothing.
 */
export function executeBy<S extends Step, R, Rec>(executors: Executors<S, R, Rec>) {
  // the compiler cannot follow `step.action` to its own member of the table: the table's type checked each
  // executor against its action's step, and the lookup below is by that same action
  type Run = (s: S, w: R | undefined, r: Rec | undefined, c: DecideContext) => Promise<Executed<Rec>>;
  const table = new Map<string, Run>(Object.entries(executors));
  return (
    step: S,
    wanted: R | undefined,
    record: Rec | undefined,
    ctx: DecideContext,
  ): Promise<Executed<Rec>> => {
    const run = table.get(step.action);
    if (!run) return Promise.resolve({ did: "failed", detail: step.detail, record: record ?? null });
    return run(step, wanted, record, ctx);
  };
}
