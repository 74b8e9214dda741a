import type { Step } from "./types.ts";

/** A step builder for one resource type: its decisions read as `step(id, did, action, detail, data?, field?)`. */
export function stepsOf(type: string) {
  return (
    id: string,
    did: Step["did"],
    action: string,
    detail: string,
    data?: unknown,
    field?: string,
  ): Step => ({
    id,
    type,
    did,
    action,
    detail,
    ...(data === undefined ? {} : { data }),
    ...(field ? { field } : {}),
  });
}
