// Types of build/progress.mjs, for the scripts and tests that import it.
export function progress(
  prefix: string,
  stream?: NodeJS.WriteStream,
): {
  tty: boolean;
  step(text: string): void;
  clear(): void;
  say(line: string, out?: NodeJS.WriteStream): void;
};
