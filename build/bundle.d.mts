// Types of build/bundle.mjs, for the tests that import it.
import type { BuildOptions, Metafile, Plugin } from "esbuild";

export const ROOT: string;
export const ENTRY: string;
export function embedFiles(): Plugin;
export function bundleOptions(o: {
  entry?: string;
  outfile: string;
  version: string;
  commit: string;
}): BuildOptions & {
  metafile: true;
};
export function externalsOf(metafile: Metafile): string[];
export function foreignExternals(metafile: Metafile): string[];
export function asciiOutput(): Plugin;
export function escapeNonAscii(text: string): string;
