// The floor: a plain serial loop doing what an apply must do at the least, with nothing else.
//   first: per file, temp file in the same directory, write, fchmod, fsync, rename; each directory fsynced once.
//   check: per file, lstat + read + sha256 against the declaration; a file that differs is rewritten as above.
// Imported by the bench (in-process floor) and run as a whole process of the pinned Node (process floor):
//   node floor.mjs first|check ROOT DECLARATION.json
// Only node:* imports, so the bench turns it into one plain .mjs (esbuild's transform) and runs that: no
// tsx and no type stripping in the floor's start-up.
import { createHash } from "node:crypto";
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";

interface Wanted {
  path: string;
  content: string;
  mode: number;
}

export function wantedOf(declFile: string): Wanted[] {
  const d = JSON.parse(readFileSync(declFile, "utf8")) as {
    resources: { type: string; path: string; content: string; mode?: string }[];
  };
  return d.resources
    .filter((r) => r.type === "file")
    .map((r) => ({ path: r.path, content: r.content, mode: Number.parseInt(r.mode ?? "0644", 8) }));
}

function writeAtomic(abs: string, bytes: Buffer, mode: number, made: Set<string>): void {
  const dir = dirname(abs);
  if (!made.has(dir)) {
    mkdirSync(dir, { recursive: true });
    made.add(dir);
  }
  const temp = join(dir, `.floor-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const fd = openSync(temp, "wx", mode);
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off);
    fchmodSync(fd, mode);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, abs);
}

function syncDirs(dirs: Iterable<string>): void {
  for (const dir of dirs) {
    const fd = openSync(dir, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}

/** Write every declared file atomically and durably; returns how many were written. */
export function floorFirst(root: string, declFile: string): number {
  const made = new Set<string>();
  const wanted = wantedOf(declFile);
  for (const w of wanted) writeAtomic(join(root, w.path), Buffer.from(w.content), w.mode, made);
  syncDirs(made);
  return wanted.length;
}

/** Read and hash every declared file; rewrite (atomically) those that differ; returns how many were rewritten. */
export function floorCheck(root: string, declFile: string): number {
  const touched = new Set<string>();
  let rewritten = 0;
  for (const w of wantedOf(declFile)) {
    const abs = join(root, w.path);
    const bytes = Buffer.from(w.content);
    let right = false;
    try {
      const st = lstatSync(abs);
      right =
        st.isFile() &&
        (st.mode & 0o7777) === w.mode &&
        createHash("sha256").update(readFileSync(abs)).digest("hex") ===
          createHash("sha256").update(bytes).digest("hex");
    } catch {
      right = false;
    }
    if (right) continue;
    writeAtomic(abs, bytes, w.mode, touched);
    rewritten++;
  }
  syncDirs(touched);
  return rewritten;
}

const [, script, what, root, declFile] = process.argv;
if (/floor\.(ts|mjs)$/.test(script ?? "") && (what === "first" || what === "check") && root && declFile) {
  const n = what === "first" ? floorFirst(root, declFile) : floorCheck(root, declFile);
  process.stdout.write(`${n}\n`);
}
