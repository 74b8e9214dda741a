// store: the node's state directory — identity and keys, membership, the kept declaration and its order, the
// records of what the host wrote and found, the originals it keeps (on disk `holds/`), the outbox, run.json, the
// lock — each file written whole or not at all (src/atomic.ts; many at once: atomic.ts here). It knows the
// vocabulary, and nothing of the machine beyond its own directory.
export * from "./atomic.ts";
export * from "./faults.ts";
export * from "./keys.ts";
export * from "./lock.ts";
export * from "./move.ts";
export * from "./order.ts";
export * from "./originals.ts";
export * from "./outbox.ts";
export * from "./run.ts";
export * from "./state.ts";
