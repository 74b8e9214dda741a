// action: argv run without a shell when what it is `on` changed; its exit and output tail go in the report.
import type * as z from "zod";
import { ACTION_DEFAULT_TIMEOUT_S, ACTION_OUTPUT_TAIL_BYTES } from "../../defaults.ts";
import { entryAt, placeProblem, placeRefuses } from "../../system/index.ts";
import type { ActionResource } from "../../vocabulary/index.ts";
import { type Applier, type ExecResult, recordOf, type StepOf } from "../types.ts";

export const ActionRecord = recordOf("action", {});
export type ActionRecord = z.infer<typeof ActionRecord>;

function tail(result: ExecResult): string {
  const text = `${result.stdout}${result.stderr}`.trim();
  const cut = text.length > ACTION_OUTPUT_TAIL_BYTES ? `…${text.slice(-ACTION_OUTPUT_TAIL_BYTES)}` : text;
  return cut ? `: ${cut.replace(/\s+/g, " ")}` : "";
}

function outcome(result: ExecResult, timeoutS: number): { ok: boolean; said: string } {
  if (result.spawnError) return { ok: false, said: `could not start: ${result.spawnError}` };
  if (result.timedOut) return { ok: false, said: `timed out after ${timeoutS} s${tail(result)}` };
  if (result.code === 0) return { ok: true, said: `exit 0${tail(result)}` };
  return {
    ok: false,
    said: `${result.code === null ? `killed by ${result.signal}` : `exit ${result.code}`}${tail(result)}`,
  };
}

/** What a run needs: the declaration's argv, environment and timeout, carried in the step. */
type RunData = Pick<ActionResource, "run" | "env" | "timeout_s">;

/** The action applier's steps: only a run carries data. */
export type ActionStep = StepOf<"run", RunData> | StepOf<"none" | "forget" | "fail" | "refuse">;

export const actionApplier: Applier<ActionResource, ActionRecord, ActionStep> = {
  recordSchema: ActionRecord,
  type: "action",
  traits: { readsChanges: () => true, stopsOnFailure: true },

  async decide(wanted, _record, ctx) {
    const base = { id: wanted.id, type: "action" };
    if (wanted.creates) {
      // something at the name itself (a link included, never followed) is what `creates` made
      const found = placeProblem(ctx.ports.root, wanted.creates) ?? entryAt(ctx.ports.root, wanted.creates);
      // what is in the way of `creates` on the machine fails this action (and so stops the apply here)
      const action = placeRefuses(wanted.creates) ? "refuse" : "fail";
      if (typeof found === "string") return { ...base, did: "failed", action, detail: `creates: ${found}` };
      if (ctx.made.has(wanted.creates) || found !== null)
        return { ...base, did: "skipped", action: "none", detail: `${wanted.creates} exists` };
    }
    if (wanted.on && !wanted.on.some((id) => ctx.changed.has(id)))
      return {
        ...base,
        did: "skipped",
        action: "none",
        detail: `nothing it is on (${wanted.on.join(", ")}) changed`,
      };
    const why = wanted.on
      ? `${wanted.on.filter((id) => ctx.changed.has(id)).join(", ")} changed`
      : wanted.creates
        ? `${wanted.creates} is absent`
        : "runs on every apply";
    const data: RunData = { run: wanted.run, env: wanted.env, timeout_s: wanted.timeout_s };
    return { ...base, did: "ran", action: "run", detail: `run ${JSON.stringify(wanted.run)} (${why})`, data };
  },

  async decideRemoval(id) {
    return {
      id,
      type: "action",
      did: "removed",
      action: "forget",
      detail: "no longer declared; an action leaves nothing to undo",
    };
  },

  async execute(step, _wanted, record, ctx) {
    if (step.action !== "run")
      return {
        did: step.did,
        detail: step.detail,
        record: step.action === "forget" ? null : (record ?? { type: "action" }),
      };
    const { data } = step;
    const timeoutS = data.timeout_s ?? ACTION_DEFAULT_TIMEOUT_S;
    // under --root the action is told where the machine is, and starts there: `creates` is checked under the
    // root, so "$MESH_ROOT/<creates>" (or the path relative to its working directory) is the one it checks
    const { root } = ctx.ports;
    const env = { ...data.env, MESH_ROOT: root };
    const result = await ctx.ports.exec.run(data.run, { env, cwd: root, timeoutMs: timeoutS * 1000 });
    const { ok, said } = outcome(result, timeoutS);
    return { did: ok ? "ran" : "failed", detail: said, record: { type: "action" } };
  },
};
