// Issue 29's "no password anywhere", searched for: a real mesh made by `mesh init`, run by `mesh up`, a node added,
// enrolled through the built executable and linked; then every file of the mesh directory and of the node's state,
// and every process of it (the servers, `mesh up`, the node's `run`: argv and environ), is read for a password
// (there is none to find) and for each private key and seed, which may stand only in its own 0600 file.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestMesh } from "../mesh/fleet.ts";
import { ensureSea } from "../support/sea.ts";

let m: TestMesh;
let dir: string;
let state: string;

beforeAll(async () => {
  process.env.MESH_HOST_BIN ??= ensureSea();
  m = await TestMesh.start("mesh-search-");
  dir = m.dir;
  state = (await m.node("web-1")).state;
}, 600_000);
afterAll(async () => {
  await m?.stop();
});

function filesUnder(d: string): string[] {
  return readdirSync(d, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(d, e.name)) : e.isFile() ? [join(d, e.name)] : [],
  );
}

/** Each secret the mesh and the node hold, with the one file it may stand in. */
function secrets(): { what: string; value: string; home: string }[] {
  const out: { what: string; value: string; home: string }[] = [];
  const seeds = JSON.parse(readFileSync(join(dir, "accounts.json"), "utf8")) as Record<string, string>;
  for (const [k, v] of Object.entries(seeds))
    out.push({ what: `${k} seed`, value: v, home: join(dir, "accounts.json") });
  const pemBody = (f: string) =>
    readFileSync(f, "utf8")
      .split("\n")
      .filter((l) => l && !l.startsWith("-----"))
      .join("");
  for (const f of ["signing.key", "tls/key.pem"])
    out.push({ what: f, value: pemBody(join(dir, f)).slice(0, 60), home: join(dir, f) });
  for (const name of readdirSync(join(state, "identity"))) {
    const home = join(state, "identity", name);
    out.push({ what: `node key ${name}`, value: readFileSync(home, "utf8").trim(), home });
  }
  return out;
}

function processesOfTest(): number[] {
  const mine = new Set<number>();
  for (const p of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, "utf8");
      if (cmd.includes(dir) || cmd.includes(state)) mine.add(Number(p));
    } catch {
      // gone, or not ours to read
    }
  }
  return [...mine];
}

describe("no password anywhere, and every key only in its own 0600 file", () => {
  it("no file of the mesh or the node holds a password, and each secret stands only in its home, 0600", () => {
    const files = [...filesUnder(dir), ...filesUnder(state)].filter((f) => !f.includes("/jetstream/"));
    const all = secrets();
    expect(all.length).toBeGreaterThanOrEqual(8);
    for (const f of files) {
      const text = readFileSync(f, "latin1");
      expect(/"password"|password:|\bpass:/i.test(text), `a password in ${relative(dir, f)}`).toBe(false);
      for (const s of all) if (text.includes(s.value)) expect(f, `${s.what} outside its file`).toBe(s.home);
    }
    for (const s of all) expect(statSync(s.home).mode & 0o777, s.what).toBe(0o600);
  });

  it("no process of the mesh or the node carries a password or a secret in its argv or environment", () => {
    const pids = processesOfTest();
    expect(pids.length).toBeGreaterThanOrEqual(3);
    const all = secrets();
    for (const pid of pids) {
      let argv = "";
      let environ = "";
      try {
        argv = readFileSync(`/proc/${pid}/cmdline`, "utf8");
        environ = readFileSync(`/proc/${pid}/environ`, "utf8");
      } catch {
        continue;
      }
      expect(/password|--pass\b/i.test(argv), `a password in the argv of pid ${pid}`).toBe(false);
      for (const text of [argv, environ])
        for (const s of all) expect(text.includes(s.value), `${s.what} in pid ${pid}`).toBe(false);
    }
  });
});
