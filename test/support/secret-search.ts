// Issue 29's "no password anywhere", searched for: every file of the given mesh directories (each machine's own
// copy) and node state directories, and every process whose argv names one of them (argv and environ), read for a
// password (there is none to find) and for each private key and seed, which may stand only in its own 0600 file
// (the same file in each copy of the mesh directory).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

interface Secret {
  what: string;
  value: string;
  /** The file it belongs in, relative to its directory: the same name in every copy. */
  home: string;
}

export interface Searched {
  /** Files read, secrets known, processes read. */
  files: number;
  secrets: number;
  processes: number;
  problems: string[];
}

function filesUnder(d: string): string[] {
  return readdirSync(d, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(d, e.name)) : e.isFile() ? [join(d, e.name)] : [],
  );
}

const pemBody = (f: string) =>
  readFileSync(f, "utf8")
    .split("\n")
    .filter((l) => l && !l.startsWith("-----"))
    .join("");

/** Each secret a mesh directory and a node's state hold. */
function secretsOf(meshDir: string, states: string[]): Secret[] {
  const out: Secret[] = [];
  const seeds = JSON.parse(readFileSync(join(meshDir, "accounts.json"), "utf8")) as Record<string, string>;
  for (const [k, v] of Object.entries(seeds))
    out.push({ what: `${k} seed`, value: v, home: "accounts.json" });
  for (const f of ["signing.key", "tls/key.pem"])
    out.push({ what: f, value: pemBody(join(meshDir, f)).slice(0, 60), home: f });
  for (const state of states)
    for (const name of readdirSync(join(state, "identity")))
      out.push({
        what: `node key ${name}`,
        value: readFileSync(join(state, "identity", name), "utf8").trim(),
        home: join("identity", name),
      });
  return out;
}

/** The processes whose argv names one of `dirs`. */
function processesNaming(dirs: string[]): number[] {
  const mine: number[] = [];
  for (const p of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, "utf8");
      if (dirs.some((d) => cmd.includes(d))) mine.push(Number(p));
    } catch {
      // gone, or not ours to read
    }
  }
  return mine;
}

/** A file's bytes as text; null when it went between its listing and now (a running node's atomic writes). */
function textOf(f: string): string | null {
  try {
    return readFileSync(f, "latin1");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw e;
  }
}

const PASSWORD_IN_FILE = /"password"|password:|\bpass:/i;
const PASSWORD_IN_ARGV = /password|--pass\b/i;

/** Search `meshDirs` (copies of one mesh directory) and the nodes' `states`; what was found, in words. */
export function searchSecrets(meshDirs: string[], states: string[]): Searched {
  const all = secretsOf(meshDirs[0]!, states);
  const problems: string[] = [];
  const roots = [...meshDirs, ...states];
  let files = 0;
  for (const root of roots)
    for (const f of filesUnder(root).filter((f) => !f.includes("/jetstream/"))) {
      const text = textOf(f);
      // a temporary file renamed into place between the listing and the read held nothing the search wants
      if (text === null) continue;
      files++;
      const rel = relative(root, f);
      if (PASSWORD_IN_FILE.test(text)) problems.push(`a password in ${f}`);
      for (const s of all)
        if (text.includes(s.value) && rel !== s.home) problems.push(`${s.what} outside its file, in ${f}`);
      if (all.some((s) => s.home === rel) && (statSync(f).mode & 0o777) !== 0o600)
        problems.push(`${f} is not 0600`);
    }
  const pids = processesNaming(roots);
  for (const pid of pids) {
    let argv = "";
    let environ = "";
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      environ = readFileSync(`/proc/${pid}/environ`, "utf8");
    } catch {
      continue;
    }
    if (PASSWORD_IN_ARGV.test(argv)) problems.push(`a password in the argv of pid ${pid}`);
    for (const text of [argv, environ])
      for (const s of all) if (text.includes(s.value)) problems.push(`${s.what} in pid ${pid}`);
  }
  return { files, secrets: all.length, processes: pids.length, problems };
}
