// Types of android/sepolicy.mjs, for the tests that import it.
import type { RcOptions } from "./rc.mjs";
export function teText(o: RcOptions): string;
export function fileContextsText(o: RcOptions): string;
