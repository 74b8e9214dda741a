// Types of build/floor.mjs, for the tests that import it.
export const GLIBC_FLOOR: string;
export const GLIBCXX_FLOOR: string;
export const CXXABI_FLOOR: string;
export type Family = "GLIBC" | "GLIBCXX" | "CXXABI";
export function versionNeeds(file: string): Record<string, string[]> | null;
export function compareVersions(a: string, b: string): -1 | 0 | 1;
export function highestNeeds(file: string): Record<Family, string | null> | null;
export function floorProblem(file: string, floors?: Record<Family, string>): string | null;
