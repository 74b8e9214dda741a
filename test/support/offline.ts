// Apply a declaration in-process against a temporary root, the way the CLI does.

import { archAppliers } from "../../src/appliers/arch/index.ts";
import type { Ports } from "../../src/appliers/types.ts";
import { type ApplyResult, applyDeclaration, type Unseal } from "../../src/apply/index.ts";
import type { HostKind } from "../../src/host-kind.ts";
import { type Host, makeHost } from "../../src/hosts/index.ts";
import { State, StoreOriginals } from "../../src/store/index.ts";
import { localExec } from "../../src/system/index.ts";
import { digestOf, parseDeclaration, refusalLine } from "../../src/vocabulary/index.ts";

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** What an in-process apply runs against: the host, its state, its ports, and how it opens secrets. */
export interface InProcess {
  host: Host;
  state: State;
  ports: Omit<Ports, "originals">;
  /** "file" (the offline path) unless the test plays a declaration the link delivered. */
  source?: "file" | "link";
  unseal?: Unseal;
}

/** Parse `raw` as on arrival (a refusal throws, naming each), then apply it as the CLI does. */
export async function applyRaw(raw: unknown, on: InProcess, dryRun = false): Promise<ApplyResult> {
  const parsed = parseDeclaration(raw, on.host.support);
  if (!parsed.ok)
    throw new Error(`declaration refused on arrival: ${parsed.refusals.map(refusalLine).join("; ")}`);
  return applyDeclaration({
    declaration: parsed.value,
    seq: 0,
    digest: digestOf(JSON.stringify(raw)),
    source: on.source ?? "file",
    dryRun,
    host: on.host,
    state: on.state,
    // a fresh view of the holds each apply, as each command of the host has
    originals: new StoreOriginals(on.state),
    ports: on.ports,
    unseal: on.unseal ?? (() => ({ ok: false, reason: "no key in this test" })),
  });
}

export interface Machine {
  root: string;
  stateDir: string;
  apply(
    d: unknown,
    opts?: { dryRun?: boolean; source?: "file" | "link"; host?: HostKind },
  ): Promise<ApplyResult>;
}

/** The host as the Linux and Arch executable makes it: on Arch, with the Arch appliers its root hands in. */
const hostOf = (kind: HostKind): Host => makeHost(kind, kind === "arch" ? archAppliers() : {});

export function machine(root: string, stateDir: string): Machine {
  return {
    root,
    stateDir,
    apply(raw, opts = {}) {
      return applyRaw(
        raw,
        {
          host: hostOf(opts.host ?? "linux"),
          state: new State(stateDir),
          ports: { root, exec: localExec(), rootless: process.getuid?.() !== 0, log: quiet },
          source: opts.source,
        },
        opts.dryRun,
      );
    },
  };
}

export function decl(resources: unknown[], extra: Record<string, unknown> = {}) {
  return { v: 1, node: "n1", mode: "converged", resources, ...extra };
}

/** A declaration for `node` of one file, /etc/app.conf (0640) holding `content`: what the bus tests push. */
export function confDecl(node: string, content: string, extra: Record<string, unknown> = {}) {
  return decl([{ id: "conf", type: "file", path: "/etc/app.conf", content, mode: "0640" }], {
    node,
    ...extra,
  });
}
