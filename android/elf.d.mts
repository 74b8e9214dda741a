// Types of android/elf.mjs, for the tests that import it.
export interface Elf {
  arch: "ia32" | "arm" | "x64" | "arm64" | null;
  machine: number;
  interpreter: { path: string; offset: number; size: number } | null;
}
export function elfOf(file: string): Elf | null;
