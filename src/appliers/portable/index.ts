// appliers/portable: the floor every host has (file, directory, action), bundled on Android as on Arch. An
// applier here decides (read only, shared by plan and apply), executes and reads back through src/system only.
// The floor's list is here: a new portable type is its vocabulary, its applier file and a line below.

import { registered } from "../dispatch.ts";
import type { ApplierList } from "../types.ts";
import { actionApplier } from "./action.ts";
import { directoryApplier } from "./directory.ts";
import { fileApplier } from "./file.ts";

export type { ActionStep } from "./action.ts";
export type { DirectoryStep } from "./directory.ts";
export type { FileRecord, FileStep } from "./file.ts";
export { actionApplier, directoryApplier, fileApplier };

/** The floor: every host's appliers, each registered under its type (the compiler checks it against its kind). */
export const PORTABLE_APPLIERS: ApplierList = {
  file: registered(fileApplier),
  directory: registered(directoryApplier),
  action: registered(actionApplier),
};
