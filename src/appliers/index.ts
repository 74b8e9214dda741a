// appliers: one per resource type, in a folder per host family — `portable/` (every host), `arch/` (the Arch
// host: service, package, process, `containers/`, `overlay/`). This index is what every applier shares: the
// Applier interface, the step and its builder. The families' own surfaces are their folders' index.ts.
export { registered } from "./dispatch.ts";
export { leftAsFound, stepsOf } from "./step.ts";
export type {
  Applier,
  ApplierList,
  DecideContext,
  Exec,
  ExecOptions,
  ExecResult,
  Executed,
  Executors,
  Found,
  KeptOriginal,
  Logger,
  OriginalMeta,
  Originals,
  Ports,
  RecordBase,
  RecordOfAny,
  Registered,
  ResourceOf,
  Step,
  StepFor,
  StepOf,
  Traits,
} from "./types.ts";
