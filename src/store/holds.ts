// Originals of what the mesh took over, kept once: the first original stays the record's for ever.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { HeldMeta, Holds } from "../appliers/types.ts";
import { writeFileAtomicSync } from "./atomic.ts";
import type { State } from "./state.ts";

const Meta = z.object({ mode: z.number().int(), uid: z.number().int(), gid: z.number().int() });
const Entry = z.object({ original: z.string(), meta: Meta, kept: z.array(z.string()) });
const IndexFile = z.object({ format: z.number().int(), entries: z.record(z.string(), Entry) });
type Entry = z.infer<typeof Entry>;

const INDEX = "holds/index.json";

export class StoreHolds implements Holds {
  private entries: Record<string, Entry> | null = null;

  constructor(private readonly state: State) {}

  private index(): Record<string, Entry> {
    this.entries ??= this.state.readVersioned(INDEX, IndexFile)?.entries ?? {};
    return this.entries;
  }

  private blobPath(sha: string): string {
    return join(this.state.dir, "holds", sha);
  }

  private saveBlob(sha: string, bytes: Uint8Array): void {
    mkdirSync(join(this.state.ensure().dir, "holds"), { recursive: true, mode: 0o700 });
    if (!existsSync(this.blobPath(sha))) writeFileAtomicSync(this.blobPath(sha), bytes, 0o600);
  }

  private saveIndex(): void {
    this.state.writeVersioned(INDEX, { entries: this.index() });
  }

  /** Synchronous on purpose: parallel file steps must not interleave the index's read-modify-write. */
  async keep(path: string, bytes: Uint8Array, meta: HeldMeta): Promise<string> {
    const sha = createHash("sha256").update(bytes).digest("hex");
    const entry = this.index()[path];
    if (entry && (entry.original === sha || entry.kept.includes(sha))) return sha;
    this.saveBlob(sha, bytes);
    if (entry) entry.kept.push(sha);
    else this.index()[path] = { original: sha, meta, kept: [] };
    this.saveIndex();
    return sha;
  }

  async original(path: string): Promise<{ bytes: Uint8Array; meta: HeldMeta; sha: string } | null> {
    const entry = this.index()[path];
    if (!entry) return null;
    return { bytes: readFileSync(this.blobPath(entry.original)), meta: entry.meta, sha: entry.original };
  }

  async release(path: string): Promise<void> {
    const entries = this.index();
    const entry = entries[path];
    if (!entry) return;
    delete entries[path];
    this.saveIndex();
    const stillUsed = new Set(Object.values(entries).flatMap((e) => [e.original, ...e.kept]));
    for (const sha of [entry.original, ...entry.kept]) {
      if (stillUsed.has(sha)) continue;
      try {
        unlinkSync(this.blobPath(sha));
      } catch {
        // already gone
      }
    }
  }

  /** Every path held now, with its original's digest: what `status` and reports show. */
  list(): { path: string; original: string; kept: number }[] {
    return Object.entries(this.index()).map(([path, e]) => ({
      path,
      original: e.original,
      kept: e.kept.length,
    }));
  }
}
