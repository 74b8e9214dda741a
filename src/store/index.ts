export * from "./atomic.ts";
export * from "./holds.ts";
export * from "./keys.ts";
export * from "./lock.ts";
export * from "./move.ts";
export * from "./order.ts";
export * from "./outbox.ts";
export * from "./state.ts";
