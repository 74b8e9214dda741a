// Temporary roots and state directories: every test runs against real files it made itself.
import { createHash } from "node:crypto";
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";

const made: string[] = [];

afterEach(() => {
  while (made.length) rmSync(made.pop()!, { recursive: true, force: true });
});

export function tempDir(prefix = "mesh-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A machine to run the CLI on: an empty root (with `dirs` made under it) and a state directory not made yet. */
export function tempMachine(...dirs: string[]): { base: string; root: string; state: string } {
  const base = tempDir();
  const root = join(base, "root");
  mkdirSync(root);
  for (const d of dirs) mkdirSync(join(root, d), { recursive: true });
  return { base, root, state: join(base, "state") };
}

/** Every entry under `dir` with its kind, mode, and content digest: equal snapshots mean nothing changed. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const name of readdirSync(d).sort()) {
      const abs = join(d, name);
      const key = `${rel}/${name}`;
      const st = lstatSync(abs);
      if (st.isSymbolicLink()) out[key] = `link ${readlinkSync(abs)}`;
      else if (st.isDirectory()) {
        out[key] = `dir ${(st.mode & 0o7777).toString(8)}`;
        walk(abs, key);
      } else
        out[key] =
          `file ${(st.mode & 0o7777).toString(8)} ${createHash("sha256").update(readFileSync(abs)).digest("hex")} ${st.mtimeMs}`;
    }
  };
  walk(dir, "");
  return out;
}
