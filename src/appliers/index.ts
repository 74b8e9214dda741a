export { actionApplier } from "./action.ts";
export { directoryApplier } from "./directory.ts";
export { localExec } from "./exec.ts";
export { fileApplier, sha256 } from "./file.ts";
export * from "./paths.ts";
export type * from "./types.ts";
