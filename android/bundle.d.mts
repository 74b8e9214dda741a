// Types of android/bundle.mjs, for the tests that import it.
import type { BuildOptions, Metafile } from "esbuild";

export const ROOT: string;
export const ANDROID_ENTRY: string;
export function isArchOnly(rel: string): boolean;
export function archModulesIn(metafile: Metafile, cwd?: string): string[];
export function androidBundleOptions(o: {
  entry?: string;
  outfile: string;
  version: string;
  commit: string;
}): BuildOptions & { metafile: true };
