// store: the node's state directory — identity and keys, membership, the kept declaration and its order, the
// records of what the host wrote and found, the originals it keeps (on disk `holds/`), the outbox, run.json, the
// lock — each file written whole or not at all and the lock held by pid and start time (both the durable layer's).
// It knows the vocabulary, and nothing of the machine beyond its own directory.
export {
  type EnsuredKeys,
  ensureKeys,
  KEY_DIR,
  KEY_NAMES,
  type KeyName,
  type KeysResult,
  keyPath,
  type LoadedKey,
  loadIdentity,
  loadKeys,
  makeKeyPair,
  makeKeys,
  makeOverlayKey,
  type NodeKeys,
  overlayKeyFromB64,
  type PublicKeys,
  privateB64,
  publicB64,
  publicKeys,
  saveKey,
  saveKeys,
} from "./keys.ts";
export { acquireLock, type Lock, LockBusy, startTimeOf } from "./lock.ts";
export {
  beginMove,
  finishMove,
  type Move,
  moveInProgress,
  type PendingNotes,
  pendingNotes,
  returnFromMove,
} from "./move.ts";
export { type Accepted, type Admitted, acceptedOf, admitInOrder, forgetOrder } from "./order.ts";
export { type OriginalMeta, type Originals, StoreOriginals } from "./originals.ts";
export { Outbox } from "./outbox.ts";
export { type OverlayKey, OverlayState, type Retired, Takeover } from "./overlay.ts";
export { type RunFile, RunRecord, readRun } from "./run.ts";
export { forgetSettled, keepSettled, settledOf } from "./settled.ts";
export {
  type BusSummary,
  type DeclaredFile,
  type GenesisFile,
  type LastFile,
  type NodeFile,
  type Records,
  State,
  StateError,
  stateFault,
} from "./state.ts";
