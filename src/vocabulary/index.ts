export * from "./declaration.ts";
export * from "./json.ts";
export * from "./names.ts";
export * from "./refusal.ts";
export * from "./resources.ts";
export * from "./wire.ts";
