// What the overlay remembers across runs, in the state directory and apart from holds (overlay.md): the
// last account of each takeover, so a host that dies mid-takeover finds it rather than forgets it, and the
// found configurations the mesh retired, so nothing writes one back.

import { mkdirSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { SECRET_FILE_MODE, STATE_DIR_MODE } from "../../../defaults.ts";
import { writeFileAtomic } from "../../../durable/index.ts";
import { State } from "../../../store/index.ts";

/** The takeover account (overlay.md): given on every takeover, failures included. */
export type Account = "not taken" | "taken" | "down";

/** How a unit (or, without systemd, an interface) was found: what giving it back restores. */
export interface FoundRun {
  enabled: boolean;
  running: boolean;
}

export interface Takeover {
  interface: string;
  state: Account;
  port: number;
  address: string;
  range: string;
  peers: number;
  mtu: number;
  /** Where its unit reads it: `<wireguard dir>/<if>.conf`. */
  path: string;
  /** The digest its original is kept under in the holds; null when it had none. */
  kept: string | null;
  found: FoundRun;
  at: string;
  /** When its configuration was retired (the ledger is the record of it; this is for status). */
  retired?: string;
}

// ---- the retirement ledger: in the state directory, apart from holds, and nothing writes a retired one back

const Retired = z.object({
  path: z.string(),
  original: z.string(),
  kept: z.string(),
  at: z.string(),
  by: z.string(),
  peer: z.string(),
});
export type Retired = z.infer<typeof Retired>;
const LedgerFile = z.object({ format: z.number().int(), retired: z.record(z.string(), Retired) });
export const LEDGER = "overlay-retired.json";
export const LEDGER_DIR = "overlay-retired";

/** Every found tunnel whose configuration the mesh retired, by interface: what status shows and a take consults. */
export function retiredTunnels(stateDir: string | undefined): Record<string, Retired> {
  if (!stateDir) return {};
  return new State(stateDir).readVersioned(LEDGER, LedgerFile)?.retired ?? {};
}

export async function recordRetired(stateDir: string, iface: string, entry: Retired, original: Uint8Array) {
  const state = new State(stateDir).ensure();
  const dir = join(stateDir, LEDGER_DIR);
  mkdirSync(dir, { recursive: true, mode: STATE_DIR_MODE });
  await writeFileAtomic(join(stateDir, entry.kept), original, { mode: SECRET_FILE_MODE });
  state.writeVersioned(LEDGER, { retired: { ...retiredTunnels(stateDir), [iface]: entry } });
}

// ---- the takeover journal: the last account of each takeover, written before anything is stopped, so a host
// that dies between stopping the found tunnel and starting its own finds the takeover `down`, not missing

const TakeoverEntry = z.object({
  interface: z.string(),
  state: z.enum(["not taken", "taken", "down"]),
  port: z.number(),
  address: z.string(),
  range: z.string(),
  peers: z.number(),
  mtu: z.number(),
  path: z.string(),
  kept: z.string().nullable(),
  found: z.object({ enabled: z.boolean(), running: z.boolean() }),
  at: z.string(),
  retired: z.string().optional(),
});
const JournalFile = z.object({ format: z.number().int(), takeovers: z.record(z.string(), TakeoverEntry) });
export const JOURNAL = "overlay-takeover.json";

/** Every takeover's last account, by the found interface's name. */
export function takeovers(stateDir: string | undefined): Record<string, Takeover> {
  if (!stateDir) return {};
  return new State(stateDir).readVersioned(JOURNAL, JournalFile)?.takeovers ?? {};
}

export function noteTakeover(
  stateDir: string | undefined,
  t: Takeover | { interface: string; forget: true },
): void {
  if (!stateDir) return;
  const all = takeovers(stateDir);
  if ("forget" in t) delete all[t.interface];
  else all[t.interface] = t;
  new State(stateDir).writeVersioned(JOURNAL, { takeovers: all });
}
