// Originals of what the mesh took over, kept once: the first original stays the record's for ever.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { STATE_DIR_MODE, STATE_FILE_MODE } from "../defaults.ts";
import { writeFileAtomicSync } from "../durable/index.ts";
import type { State } from "./state.ts";

/** Originals of what the mesh took over, kept beside the state: the port appliers are handed (Ports.originals), declared here with its one implementation. */
export interface Originals {
  /**
   * Keep `bytes` found at `path`: the first becomes the original, a later different content is kept once beside
   * it. `secret`: a secret (or a private key) is written there, so the original's digest is never said again.
   */
  keep(path: string, bytes: Uint8Array, meta: OriginalMeta, secret?: boolean): Promise<string>;
  /** The original kept for `path`, if any. */
  original(path: string): Promise<{ bytes: Uint8Array; meta: OriginalMeta; sha: string } | null>;
  /** The hold ends once the original is given back. */
  release(path: string): Promise<void>;
}

export interface OriginalMeta {
  mode: number;
  uid: number;
  gid: number;
}

const Meta = z.object({ mode: z.number().int(), uid: z.number().int(), gid: z.number().int() });
/** `secret`: a secret was written over it (sticky): a digest of what a secret replaced is said nowhere. */
const Entry = z.object({
  original: z.string(),
  meta: Meta,
  kept: z.array(z.string()),
  secret: z.boolean().optional(),
});
const IndexFile = z.object({ format: z.number().int(), entries: z.record(z.string(), Entry) });
type Entry = z.infer<typeof Entry>;

const INDEX = "holds/index.json";

export class StoreOriginals implements Originals {
  private entries: Record<string, Entry> | null = null;
  /** Originals given back in this apply, ended only once the records no longer name them (see `commit`). */
  private readonly releasing = new Set<string>();

  constructor(private readonly state: State) {}

  private index(): Record<string, Entry> {
    this.entries ??= this.state.readVersioned(INDEX, IndexFile)?.entries ?? {};
    return this.entries;
  }

  private blobPath(sha: string): string {
    return join(this.state.dir, "holds", sha);
  }

  private saveBlob(sha: string, bytes: Uint8Array): void {
    mkdirSync(join(this.state.ensure().dir, "holds"), { recursive: true, mode: STATE_DIR_MODE });
    if (!existsSync(this.blobPath(sha))) writeFileAtomicSync(this.blobPath(sha), bytes, STATE_FILE_MODE);
  }

  private saveIndex(): void {
    this.state.writeVersioned(INDEX, { entries: this.index() });
  }

  /** Synchronous on purpose: parallel file steps must not interleave the index's read-modify-write. */
  async keep(path: string, bytes: Uint8Array, meta: OriginalMeta, secret = false): Promise<string> {
    this.releasing.delete(path);
    const sha = createHash("sha256").update(bytes).digest("hex");
    const entry = this.index()[path];
    if (secret) this.markSecret(path);
    if (entry && (entry.original === sha || entry.kept.includes(sha))) return sha;
    this.saveBlob(sha, bytes);
    if (entry) entry.kept.push(sha);
    // only the mode and owner: a caller may hand over the whole found file, bytes and all
    else
      this.index()[path] = {
        original: sha,
        meta: { mode: meta.mode, uid: meta.uid, gid: meta.gid },
        kept: [],
        ...(secret ? { secret: true } : {}),
      };
    this.saveIndex();
    return sha;
  }

  /** A secret is written at a held path: from now on its original is listed without its digest. */
  markSecret(path: string): void {
    const entry = this.index()[path];
    if (!entry || entry.secret) return;
    entry.secret = true;
    this.saveIndex();
  }

  async original(path: string): Promise<{ bytes: Uint8Array; meta: OriginalMeta; sha: string } | null> {
    const entry = this.index()[path];
    if (!entry) return null;
    return { bytes: readFileSync(this.blobPath(entry.original)), meta: entry.meta, sha: entry.original };
  }

  /**
   * The original was given back: the hold ends, but only at `commit`, after the records stop naming it. Ending
   * it at once left a window where a kill -9 kept a record saying "held" with nothing held, and every later
   * undeclare failed ("no original is held to give back").
   */
  async release(path: string): Promise<void> {
    this.releasing.add(path);
  }

  /**
   * End the holds given back, once the records are written. With no records left at all, nothing the mesh
   * manages can name a hold, so any left by a crash between a records write and a commit end too.
   */
  commit(recordsLeft: number): void {
    const entries = this.index();
    const ending = recordsLeft === 0 ? Object.keys(entries) : [...this.releasing].filter((p) => entries[p]);
    this.releasing.clear();
    if (ending.length) {
      for (const p of ending) delete entries[p];
      this.saveIndex();
    }
    if (ending.length || recordsLeft === 0) this.dropUnusedBlobs();
  }

  /** Blobs no hold names: those just ended, and any a kill left between a blob's write and the index's. */
  private dropUnusedBlobs(): void {
    const used = new Set(Object.values(this.index()).flatMap((e) => [e.original, ...e.kept]));
    for (const name of this.state.list("holds")) {
      if (!/^[0-9a-f]{64}$/.test(name) || used.has(name)) continue;
      try {
        unlinkSync(this.blobPath(name));
      } catch {
        // already gone
      }
    }
  }

  /**
   * Every path held now, with its original's digest unless a secret replaced it: what `status` and reports show.
   * An unsalted digest of a weak secret is the secret, guessed offline.
   */
  list(): { path: string; original?: string; kept: number }[] {
    return Object.entries(this.index())
      .filter(([path]) => !this.releasing.has(path))
      .map(([path, e]) => ({
        path,
        ...(e.secret ? {} : { original: e.original }),
        kept: e.kept.length,
      }));
  }
}
