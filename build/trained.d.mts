// Types of build/trained.mjs, for the tests that import it (only what they use).
export const BUNDLE_ASSET: string;
export const CACHE_ASSET: string;
export const CACHE_FILE: string;
export const LOADER: string;
export function loaderText(): string;
export function trainCodeCache(
  run: (argv: string[], opts?: object) => string,
  runtime: string,
  work: string,
  bundle: string,
): Buffer;
