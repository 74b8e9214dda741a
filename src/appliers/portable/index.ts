// appliers/portable: the floor every host has (file, directory, action), bundled on Android as on Arch. An
// applier here decides (read only, shared by plan and apply), executes and reads back through src/system only.
export { type ActionStep, actionApplier } from "./action.ts";
export { type DirectoryStep, directoryApplier } from "./directory.ts";
export { type FileRecord, type FileStep, fileApplier } from "./file.ts";
export { fileDiff } from "./file-diff.ts";
