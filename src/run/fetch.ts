// A release's stored object fetched chunk by chunk into the state directory, resumable: `<sha>.part` holds the
// bytes kept so far and `<sha>.json` where they end (the object's NUID, the stream sequence of the last chunk
// kept, the byte count), written every few chunks after the part is synced. A fetch cut by a lost link (or a
// SIGKILL) starts again from there, on this link or the next; an object replaced on the bus starts afresh.
import { createHash } from "node:crypto";
import {
  closeSync,
  createReadStream,
  fsyncSync,
  ftruncateSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { RELEASE_PROGRESS_CHUNKS, STATE_FILE_MODE } from "../defaults.ts";
import { writeFileAtomicSync } from "../durable/index.ts";
import type { ReleaseSource } from "../link/index.ts";
import type { ObjectMeta, ReleaseManifest } from "../vocabulary/index.ts";

/** The object whole and checked (`resumedFrom`: the bytes an earlier, cut fetch had kept), or why not. */
export type Fetched =
  | { ok: true; path: string; resumedFrom: number }
  | { ok: false; reason: string; refused: boolean };

interface Progress {
  nuid: string;
  seq: number;
  bytes: number;
}

/** Where an earlier fetch of this object stood, if its part file still holds that much. */
function progressOf(file: string, part: string, nuid: string): Progress {
  try {
    const p = JSON.parse(readFileSync(file, "utf8")) as Progress;
    if (
      p.nuid === nuid &&
      Number.isSafeInteger(p.seq) &&
      Number.isSafeInteger(p.bytes) &&
      statSync(part).size >= p.bytes
    )
      return p;
  } catch {
    // none, or not readable: from the start
  }
  return { nuid, seq: 0, bytes: 0 };
}

/** Parts of other releases left in the directory go (one release is fetched at a time); "" sweeps all. */
export function sweepOthers(dir: string, keep: string): void {
  for (const name of readdirSync(dir))
    if (keep === "" || !name.startsWith(keep)) rmSync(join(dir, name), { force: true });
}

export async function fetchStored(
  meta: ObjectMeta,
  m: ReleaseManifest,
  source: ReleaseSource,
  dir: string,
): Promise<Fetched> {
  sweepOthers(dir, m.stored.sha256);
  const part = join(dir, `${m.stored.sha256}.part`);
  const progressFile = join(dir, `${m.stored.sha256}.json`);
  let at = progressOf(progressFile, part, meta.nuid);
  const resumedFrom = at.bytes;
  const fd = openSync(part, at.bytes > 0 ? "r+" : "w", STATE_FILE_MODE);
  const save = () => {
    fsyncSync(fd);
    writeFileAtomicSync(progressFile, JSON.stringify(at));
  };
  try {
    ftruncateSync(fd, at.bytes);
    for (let n = 1; at.bytes < m.stored.size; n++) {
      const c = await source.chunk(meta.nuid, at.seq + 1);
      if (!c) break;
      if (at.bytes + c.data.length > m.stored.size)
        return refuse(part, progressFile, "the object is larger than its manifest says");
      writeSync(fd, c.data, 0, c.data.length, at.bytes);
      at = { nuid: meta.nuid, seq: c.seq, bytes: at.bytes + c.data.length };
      if (n % RELEASE_PROGRESS_CHUNKS === 0) save();
    }
    save();
  } catch (e) {
    save();
    return {
      ok: false,
      reason: `fetch cut at ${at.bytes} of ${m.stored.size} bytes (${(e as Error).message}): it resumes from there`,
      refused: false,
    };
  } finally {
    closeSync(fd);
  }
  if (at.bytes !== m.stored.size)
    return refuse(
      part,
      progressFile,
      `the object holds ${at.bytes} bytes, its manifest says ${m.stored.size}`,
    );
  if ((await digestOf(part)) !== m.stored.sha256)
    return refuse(part, progressFile, "the object's SHA-256 is not its signed manifest's");
  // the record stays until the release is installed: a kill while it is unpacked need not fetch it again
  return { ok: true, path: part, resumedFrom };
}

function refuse(part: string, progress: string, why: string): Fetched {
  rmSync(part, { force: true });
  rmSync(progress, { force: true });
  return { ok: false, reason: why, refused: true };
}

async function digestOf(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}
