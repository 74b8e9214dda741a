// The installed binary's identity: its digest for `confirmed`, and a cheap stamp to notice pacman replacing it.
import { createHash } from "node:crypto";
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { HASH_CHUNK_BYTES } from "../defaults.ts";

/** SHA-256 of the file at `path`: the binary's identity for `confirmed` and for noticing an upgrade. */
export function digestOfFile(path: string): string | null {
  // in chunks: reading a 100 MB executable whole cost the running host 100 MB of RSS for ever after
  let fd: number | null = null;
  try {
    fd = openSync(path, "r");
    const hash = createHash("sha256");
    const chunk = Buffer.allocUnsafe(HASH_CHUNK_BYTES);
    for (let n = readSync(fd, chunk); n > 0; n = readSync(fd, chunk)) hash.update(chunk.subarray(0, n));
    return hash.digest("hex");
  } catch {
    return null;
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** A cheap fingerprint of a file's identity, so the digest is recomputed only when the file was replaced. */
export function fileStamp(path: string): string {
  try {
    const st = statSync(path);
    return `${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch {
    return "gone";
  }
}
