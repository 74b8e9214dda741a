// apply: a declaration planned against the records and the machine (each applier's `decide`, read only), then
// applied step by step with a journal, each step read back, and the report built. sources.ts is how one arrives
// (delivered, kept, a file): the one place an envelope is verified and the state lock taken. It reaches the
// machine only through the host's appliers and keeps its records in the store; it knows nothing of the bus.

export { holdsIn } from "./adopted.ts";
export {
  type ApplyRequest,
  type ApplyResult,
  applyDeclaration,
  modeRefusal,
  type PlanLine,
  reportWithoutSteps,
  type Unseal,
} from "./apply.ts";
export { declaredPaths, planSteps } from "./decide.ts";
export { planAsked } from "./planned.ts";
export {
  type ApplyOptions,
  type Arrival,
  applyDelivered,
  applyFile,
  applyKept,
  type Machine,
  type NodeParts,
} from "./sources.ts";
export { CHANGING } from "./steps.ts";
