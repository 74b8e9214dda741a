// What a planned file write will change, for `--diff`: its content as a unified diff, its mode and owner; never
// the content (nor a digest) of a file filled from a secret.
import { MAX_DIFF_BYTES, MAX_DIFF_LINES } from "../../defaults.ts";
import { octal, readFileAt } from "../../system/index.ts";
import type { FileResource } from "../../vocabulary/index.ts";
import { unifiedDiff } from "./unified-diff.ts";

interface Before {
  bytes: Uint8Array | null;
  mode: number;
  uid: number;
  gid: number;
}

/** What is at the path now, walked as the apply walks it (no link followed); null when absent or unreadable. */
async function before(root: string, path: string): Promise<Before | null> {
  const read = await readFileAt(root, path);
  if (read === null || typeof read === "string") return null;
  return { ...read, bytes: read.bytes.length <= MAX_DIFF_BYTES ? read.bytes : null };
}

const decoder = new TextDecoder("utf-8", { fatal: true });
/** The bytes as text, or null when they are not (a NUL, or not UTF-8): a binary file gets sizes, not lines. */
function textOf(bytes: Uint8Array): string | null {
  if (bytes.includes(0)) return null;
  try {
    return decoder.decode(bytes);
  } catch {
    return null;
  }
}

/** What a planned write puts at the path: its bytes, mode and owner (the file applier's write step's data). */
export interface Written {
  bytes: Uint8Array;
  mode: number;
  uid?: number;
  gid?: number;
}

/** The diff lines of a planned write of `wanted`: handed the write by the file applier, it imports nothing of it. */
export async function fileDiff(w: Written, wanted: FileResource, root: string): Promise<string[]> {
  const now = await before(root, wanted.path);
  const out: string[] = [];
  if (wanted.secret) out.push("(secret: content not shown)");
  else out.push(...contentDiff(wanted.path, now, w.bytes));
  if (now && now.mode !== w.mode) out.push(`mode ${octal(now.mode)} -> ${octal(w.mode)}`);
  if (now && w.uid !== undefined && now.uid !== w.uid) out.push(`owner uid ${now.uid} -> ${w.uid}`);
  if (now && w.gid !== undefined && now.gid !== w.gid) out.push(`group gid ${now.gid} -> ${w.gid}`);
  return out;
}

function contentDiff(path: string, now: Before | null, bytes: Uint8Array): string[] {
  if (now && now.bytes === null) return [`(${path} is too large to compare here)`];
  const old = now?.bytes ?? new Uint8Array();
  const [a, b] = [textOf(old), textOf(bytes)];
  if (a === null || b === null) {
    if (now && Buffer.compare(Buffer.from(old), Buffer.from(bytes)) === 0) return [];
    return [`(binary content: ${now ? `${old.length} bytes` : "none"} -> ${bytes.length} bytes)`];
  }
  const headers: [string, string] = [now ? `${path} (now)` : "/dev/null", `${path} (declared)`];
  return unifiedDiff(a, b, headers, MAX_DIFF_LINES);
}
