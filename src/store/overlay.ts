// What the overlay remembers in the state directory, apart from the originals (overlay.md): its key, the last
// account of each takeover (so a host that dies mid-takeover finds it rather than forgets it), the found
// configurations the mesh retired with their originals (so nothing writes one back), and the rekey last told.
// The overlay applier and the `overlay` and `status` commands reach these through this port, never by name.
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { SECRET_FILE_MODE, STATE_DIR_MODE } from "../defaults.ts";
import { writeFileAtomic } from "../durable/index.ts";
import { keyPath, overlayKeyFromB64, privateB64, publicB64 } from "./keys.ts";
import type { State } from "./state.ts";

const Retired = z.object({
  path: z.string(),
  original: z.string(),
  /** Where its original is kept, from the state directory. */
  kept: z.string(),
  at: z.string(),
  by: z.string(),
  peer: z.string(),
});
/** A found configuration the mesh retired: where it was, its original's digest, who proved it, when. */
export type Retired = z.infer<typeof Retired>;
const LedgerFile = z.object({ format: z.number().int(), retired: z.record(z.string(), Retired) });

/**
 * A takeover's account: journalled here, and carried in the overlay's record (the overlay applier's record
 * schema reads it with this one), so the two never disagree on its shape.
 */
export const Takeover = z.object({
  interface: z.string(),
  /** The takeover account (overlay.md): given on every takeover, failures included. */
  state: z.enum(["not taken", "taken", "down"]),
  port: z.number(),
  address: z.string(),
  range: z.string(),
  peers: z.number(),
  mtu: z.number(),
  /** Where its unit reads it: `<wireguard dir>/<if>.conf`. */
  path: z.string(),
  /** The digest its original is kept under in the holds; null when it had none. */
  kept: z.string().nullable(),
  /** How a unit (or, without systemd, an interface) was found: what giving it back restores. */
  found: z.object({ enabled: z.boolean(), running: z.boolean() }),
  at: z.string(),
  /** When its configuration was retired (the ledger is the record of it; this is for status). */
  retired: z.string().optional(),
});
export type Takeover = z.infer<typeof Takeover>;
const JournalFile = z.object({ format: z.number().int(), takeovers: z.record(z.string(), Takeover) });

const ToldFile = z.looseObject({ format: z.number().int(), rekey: z.unknown() });

const LEDGER = "overlay-retired.json";
const LEDGER_DIR = "overlay-retired";
const JOURNAL = "overlay-takeover.json";
const TOLD = "overlay-rekey.json";

/** The node's overlay key as WireGuard writes it (standard base64). */
export interface OverlayKey {
  private: string;
  public: string;
}

/** The overlay's files in the state directory, by what they hold. */
export class OverlayState {
  constructor(private readonly state: State) {}

  /** The node's overlay key, or why it cannot be read (a reason never quotes the file). */
  key(): OverlayKey | string {
    const path = keyPath(this.state.dir, "overlay");
    let text: string;
    try {
      text = readFileSync(path, "utf8");
    } catch (e) {
      return `the node's overlay key ${path} cannot be read: ${(e as NodeJS.ErrnoException).code} (enrol first)`;
    }
    const pair = overlayKeyFromB64(text);
    if (!pair) return `${path} is not a key file`;
    return { private: privateB64(pair.privateKey), public: publicB64(pair.publicKey) };
  }

  /** Every found tunnel whose configuration the mesh retired, by interface. */
  retired(): Record<string, Retired> {
    return this.state.readVersioned(LEDGER, LedgerFile)?.retired ?? {};
  }

  /**
   * A retirement recorded, its original kept first (0600, under the state directory): written before anything
   * is removed, so a crash between the two still finds it retired. Returns where the original is kept.
   */
  async recordRetired(iface: string, entry: Omit<Retired, "kept">, original: Uint8Array): Promise<string> {
    this.state.ensure();
    const kept = `${LEDGER_DIR}/${entry.original}`;
    mkdirSync(this.state.path(LEDGER_DIR), { recursive: true, mode: STATE_DIR_MODE });
    await writeFileAtomic(this.state.path(kept), original, { mode: SECRET_FILE_MODE });
    this.state.writeVersioned(LEDGER, { retired: { ...this.retired(), [iface]: { ...entry, kept } } });
    return this.keptPath(kept);
  }

  /** Where a retired configuration's original is kept, as a path. */
  keptPath(kept: string): string {
    return join(this.state.dir, kept);
  }

  /** Every takeover's last account, by the found interface's name. */
  takeovers(): Record<string, Takeover> {
    return this.state.readVersioned(JOURNAL, JournalFile)?.takeovers ?? {};
  }

  /** A takeover's account noted (written before anything is stopped), or forgotten once given back. */
  noteTakeover(t: Takeover | { interface: string; forget: true }): void {
    const all = this.takeovers();
    if ("forget" in t) delete all[t.interface];
    else all[t.interface] = t;
    this.state.writeVersioned(JOURNAL, { takeovers: all });
  }

  /** The rekey last told the mesh, as it was kept (its caller judges its shape); null when none was. */
  readTold(): unknown {
    try {
      return this.state.readVersioned(TOLD, ToldFile)?.rekey ?? null;
    } catch {
      return null;
    }
  }

  /** What was told, kept so a run after the key was written can say exactly the same again. */
  writeTold(rekey: unknown, seq: number): void {
    this.state.writeVersioned(TOLD, { rekey, seq, at: new Date().toISOString() });
  }
}
