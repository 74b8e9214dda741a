// Apply a declaration in-process against a temporary root, the way the CLI does.

import { localExec } from "../../src/appliers/index.ts";
import { type ApplyResult, applyDeclaration } from "../../src/apply/index.ts";
import { type HostKind, makeHost } from "../../src/hosts/index.ts";
import { State, StoreHolds } from "../../src/store/index.ts";
import { type Declaration, digestOf, parseDeclaration } from "../../src/vocabulary/index.ts";

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

export interface Machine {
  root: string;
  stateDir: string;
  apply(
    d: unknown,
    opts?: { dryRun?: boolean; source?: "file" | "link"; host?: HostKind },
  ): Promise<ApplyResult>;
}

export function machine(root: string, stateDir: string): Machine {
  return {
    root,
    stateDir,
    async apply(raw, opts = {}) {
      const host = makeHost(opts.host ?? "linux");
      const parsed = parseDeclaration(raw, host.support);
      if (!parsed.ok) throw new Error(`declaration refused: ${JSON.stringify(parsed.refusals)}`);
      const state = new State(stateDir);
      return applyDeclaration({
        declaration: parsed.value as Declaration,
        seq: 0,
        digest: digestOf(JSON.stringify(raw)),
        source: opts.source ?? "file",
        dryRun: opts.dryRun ?? false,
        host,
        state,
        holds: new StoreHolds(state),
        ports: { root, exec: localExec(), rootless: process.getuid?.() !== 0, log: quiet },
        unseal: () => ({ ok: false, reason: "no key in this test" }),
      });
    },
  };
}

export function decl(resources: unknown[], extra: Record<string, unknown> = {}) {
  return { v: 1, node: "n1", mode: "converged", resources, ...extra };
}
