// The installed binary's identity: its digest for `confirmed`, and a cheap stamp to notice pacman replacing it.
import { createHash } from "node:crypto";
import { closeSync, fstatSync, openSync, read, type Stats, statSync } from "node:fs";
import { open } from "node:fs/promises";
import { HASH_CHUNK_BYTES } from "../defaults.ts";

/** SHA-256 of an open file, read in chunks without blocking the event loop; null when it cannot be read. */
async function digestOfFd(fd: number): Promise<string | null> {
  // in chunks: reading a 100 MB executable whole cost the running host 100 MB of RSS for ever after
  const hash = createHash("sha256");
  const chunk = Buffer.allocUnsafe(HASH_CHUNK_BYTES);
  const readAt = (position: number) =>
    new Promise<number>((resolve, reject) =>
      read(fd, chunk, 0, chunk.length, position, (e, n) => (e ? reject(e) : resolve(n))),
    );
  try {
    let at = 0;
    for (let n = await readAt(at); n > 0; n = await readAt(at)) {
      hash.update(chunk.subarray(0, n));
      at += n;
    }
    return hash.digest("hex");
  } catch {
    return null;
  }
}

/** SHA-256 of the file at `path` (the new binary pacman put there); null when it cannot be read. */
export async function digestOfFile(path: string): Promise<string | null> {
  const file = await open(path, "r").catch(() => null);
  if (!file) return null;
  try {
    return await digestOfFd(file.fd);
  } finally {
    await file.close().catch(() => {});
  }
}

const stampOf = (st: Stats) => `${st.ino}:${st.size}:${st.mtimeMs}`;

/** A cheap fingerprint of a file's identity, so the digest is recomputed only when the file was replaced. */
export function fileStamp(path: string): string {
  try {
    return stampOf(statSync(path));
  } catch {
    return "gone";
  }
}

/**
 * A binary as it was when this process started, its digest read only when asked for. Hashing ~100 MB before
 * the first heartbeat made a start without the launcher take over a second; so the file is opened at start
 * (which pins its contents: pacman replaces a file by a new inode) and hashed through that descriptor later,
 * off the path to the link. Contents changed in place since the start (its stamp moved) make the digest
 * unknown (null), never the new file's: what this process started as is then no longer knowable.
 */
export class BinaryAtStart {
  /** The stamp of the file opened at start ("gone" when it could not be opened). */
  readonly stamp: string;
  private fd: number | null = null;
  private digested: Promise<string | null> | null;

  constructor(
    readonly path: string,
    /** Its digest, when the launcher already computed it. */
    given?: string,
  ) {
    this.digested = given ? Promise.resolve(given) : null;
    try {
      this.fd = openSync(path, "r");
      this.stamp = stampOf(fstatSync(this.fd));
    } catch {
      this.stamp = "gone";
    }
    if (given) this.release();
  }

  /** Its SHA-256 as it started, hashed once, at the first asking; null when that cannot be known. */
  digest(): Promise<string | null> {
    this.digested ??= this.hashPinned();
    return this.digested;
  }

  private async hashPinned(): Promise<string | null> {
    const fd = this.fd;
    if (fd === null) return null;
    try {
      const digest = await digestOfFd(fd);
      return stampOf(fstatSync(fd)) === this.stamp ? digest : null;
    } finally {
      this.release();
    }
  }

  /** The descriptor is not kept once the digest is known: it would keep a replaced 100 MB file on disk. */
  private release(): void {
    if (this.fd === null) return;
    closeSync(this.fd);
    this.fd = null;
  }
}
