// Types of android/rc.mjs, for the tests that import it.
export interface RcOptions {
  binary: string;
  state: string;
  user: string;
  group: string;
  start: "class" | "boot-completed";
  launcher: string | null;
  seclabel: string | null;
}
export const RC_DEFAULTS: Readonly<RcOptions>;
export const START_MODES: readonly RcOptions["start"][];
export const USERDEBUG_SECLABEL: string;
export function dataBinary(state: string): string;
export function rcProblem(o: RcOptions): string | null;
export function rcText(options?: Partial<RcOptions>): string;
