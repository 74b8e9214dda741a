// system: what the host does to the machine below any step or resource. Owned here: the file system as the
// appliers reach it, every declared path walked from a handle on `--root` one component at a time with no
// link followed, and every read and effect (write, rename, mkdir, chmod, chown, read-back, removal) done on
// the handles that walk gave (walk.ts says how, and why /proc/self/fd). Also the exec port (argv, no shell, a
// timeout, a tail of output), where a declared path lands under the root, and the digest. Nothing here knows a
// step or a resource; the drivers of one host family live in a folder of its own (`arch/`, its own index.ts).
export { sha256 } from "./digest.ts";
export { type Exec, type ExecOptions, type ExecResult, localExec } from "./exec.ts";
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
export {
  forgetResolved,
  type Ids,
  idsField,
  octal,
  ownerIgnored,
  parseMode,
  placeProblem,
  placeRefuses,
  resolveIds,
  underRoot,
} from "./paths.ts";
export {
  type DirMaker,
  forgetHandles,
  forgetUnder,
  handlesProblem,
  keptDir,
  type MadeDir,
  PathRefused,
} from "./walk.ts";
