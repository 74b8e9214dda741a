// Types of build/tools.mjs, for the tests that import it (only what they use).
export const BLOB_MAKER_FLAGS: string[];
export const SEA_EXEC_ARGV: string[];
export function runner(fail: (message: string) => never): (argv: string[], opts?: object) => string;
export function writeSeaConfig(
  work: string,
  main: string,
  useCodeCache: boolean,
  assets?: Record<string, string>,
): { output: string };
export function makeBlob(
  run: (argv: string[], opts?: object) => string,
  maker: string,
  work: string,
  config: { output: string },
): Buffer;
