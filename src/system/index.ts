// system: what the host does to the machine below any step or resource. Owned here: the file system as the
// appliers reach it, every declared path walked from a handle on `--root` one component at a time with no
// link followed, and every read and effect (write, rename, mkdir, chmod, chown, read-back, removal) done on
// the handles that walk gave (walk.ts says how, and why /proc/self/fd). Nothing here knows a step.
export {
  chmodDirAt,
  type Entry,
  entryAt,
  type FileRead,
  listAt,
  openDirAt,
  openFileAt,
  readFileAt,
  removeDirAt,
  removeEntryIn,
  removeFileAt,
  removeTreeAt,
  setOnHandle,
  sweepTempsAt,
  type WriteOptions,
  writeFileAt,
} from "./files.ts";
export { forgetHandles, forgetUnder, handlesProblem, keptDir, PathRefused } from "./walk.ts";
