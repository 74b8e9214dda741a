// durable: a file on disk written whole or not at all (temp file beside it, fsync, rename, fsync the directory),
// the temp names a later start sweeps, and the pid+start-time lock. The lowest layer: the store, the drivers and
// the operator's half (which may import nothing of the host's) all write and lock the one way.

export { type Lock, LockBusy, LockRefused, startTimeOf, takeLock } from "./lock.ts";
export {
  type AtomicWriteOptions,
  commitTemp,
  commitTempSync,
  fillTemp,
  fsPromises,
  fsyncDir,
  fsyncDirShared,
  fsyncDirSync,
  isTempName,
  renameTemp,
  sweepTempsBeside,
  syncFilled,
  tempPathFor,
  writeFileAtomic,
  writeFileAtomicSync,
} from "./write.ts";
