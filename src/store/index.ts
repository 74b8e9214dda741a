// store: the node's state directory — identity and keys, membership, the kept declaration and its order, the
// records of what the host wrote and found, the originals it keeps (on disk `holds/`), the outbox, run.json, the
// lock — each file written whole or not at all and the lock held by pid and start time (both the durable layer's).
// It knows the vocabulary, and nothing of the machine beyond its own directory.
export * from "./faults.ts";
export * from "./keys.ts";
export * from "./lock.ts";
export * from "./move.ts";
export * from "./order.ts";
export * from "./originals.ts";
export * from "./outbox.ts";
export * from "./overlay.ts";
export * from "./run.ts";
export * from "./state.ts";
