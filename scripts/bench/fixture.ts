// The bench's files: N files of 200 bytes, mode 0644, 100 to a directory, and the declaration naming them.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const FILE_BYTES = 200;
export const FILES_PER_DIR = 100;
export const BENCH_NODE = "bench";
export const FILE_MODE = "0644";

export interface BenchFile {
  id: string;
  /** The declared (absolute) path; on the machine it is `root + path`. */
  path: string;
  content: string;
}

const pad = (n: number, width: number) => String(n).padStart(width, "0");

/** Exactly FILE_BYTES of printable ASCII ending in a newline; `salt` makes another version of the same file. */
export function contentOf(i: number, salt = ""): string {
  const head = `# mesh-host bench file ${i}${salt ? ` ${salt}` : ""}\n`;
  const filler = "the quick brown fox jumps over the lazy dog 0123456789 ";
  let body = head;
  while (body.length < FILE_BYTES - 1) body += filler;
  return `${body.slice(0, FILE_BYTES - 1)}\n`;
}

export function benchFiles(n: number, base = "/bench", salt = ""): BenchFile[] {
  return Array.from({ length: n }, (_, i) => {
    const id = `f${pad(i, 5)}`;
    return {
      id,
      path: `${base}/d${pad(Math.floor(i / FILES_PER_DIR), 3)}/${id}.conf`,
      content: contentOf(i, salt),
    };
  });
}

export function declarationOf(files: readonly BenchFile[], node = BENCH_NODE) {
  return {
    v: 1,
    node,
    mode: "converged",
    resources: files.map((f) => ({
      id: f.id,
      type: "file",
      path: f.path,
      content: f.content,
      mode: FILE_MODE,
    })),
  };
}

export interface Workspace {
  /** Everything the bench makes lives under here and is removed at the end. */
  dir: string;
  /** The declaration for N files, written once and shared by every tool. */
  declFile: string;
  files: BenchFile[];
  n: number;
  /** A fresh, empty root and state directory for one run (or one series of runs). */
  fresh(label: string): { root: string; state: string };
  cleanup(): void;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function workspace(n: number, parent?: string): Workspace {
  const dir = parent ? mkdtempSync(join(parent, `n${n}-`)) : tempDir(`mesh-bench-n${n}-`);
  const files = benchFiles(n);
  const declFile = join(dir, "declaration.json");
  writeFileSync(declFile, JSON.stringify(declarationOf(files)));
  let k = 0;
  return {
    dir,
    declFile,
    files,
    n,
    fresh(label) {
      const base = mkdtempSync(join(dir, `${label}-${k++}-`));
      const root = join(base, "root");
      const state = join(base, "state");
      for (const d of [root, state]) mkdirSync(d, { recursive: true });
      return { root, state };
    },
    cleanup() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Edit one managed file by hand, in place (as a person with an editor would): the drift to repair. */
export function driftOne(root: string, file: BenchFile, k: number): void {
  writeFileSync(join(root, file.path), `${file.content}# edited by hand ${k}\n`);
}

/** How many of `files` are under `root` exactly as declared (content and mode). */
export function countRight(root: string, files: readonly BenchFile[]): number {
  let right = 0;
  for (const f of files) {
    try {
      const abs = join(root, f.path);
      if ((statSync(abs).mode & 0o7777) === 0o644 && readFileSync(abs, "utf8") === f.content) right++;
    } catch {
      // absent: not right
    }
  }
  return right;
}
