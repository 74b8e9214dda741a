// vocabulary: what the mesh and the node say to each other, as zod schemas (types are their `z.infer`) — the
// envelope, the declaration and every resource type, the one rule for names and paths, refusals, sealing, the
// enrolment code, and the names the protocol composes (subjects.ts). It imports no other layer.
export * from "./code.ts";
export * from "./declaration.ts";
export * from "./envelope.ts";
export * from "./json.ts";
export * from "./kind.ts";
export * from "./names.ts";
export * from "./nkeys.ts";
export * from "./plan.ts";
export * from "./printable.ts";
export * from "./raw-keys.ts";
export * from "./refusal.ts";
export * from "./release.ts";
export * from "./resources.ts";
export * from "./seal.ts";
export * from "./signed.ts";
export * from "./subjects.ts";
export * from "./wire.ts";
