// Building an applier's steps and carrying them out by action: the one place a step's action meets its data.
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

/** The executor of a step its decision failed (`fail`, `refuse`): it fails again, touching nothing. */
export async function failsAgain<Rec>(
  s: Step,
  _wanted: unknown,
  record: Rec | undefined,
): Promise<Executed<Rec>> {
  return { did: "failed", detail: s.detail, record: record ?? null };
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
