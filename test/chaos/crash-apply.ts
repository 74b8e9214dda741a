// Scenario 1, crash during apply: `mesh-host apply` SIGKILLed at a random instant of an apply of 200 files and
// a few actions. The machine must hold the old state or the new, file by file; the state must parse; the lock
// must not be stuck; the next run must finish the apply and leave no temp file; and undeclaring everything at
// the end must give back exactly the originals and remove exactly what the mesh made (where a journal bug shows).
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { State, StoreOriginals } from "../../src/store/index.ts";
import {
  awaitLockBy,
  describeExit,
  diffSnaps,
  type Exit,
  jsonOf,
  meshHost,
  type Outcome,
  type RunOptions,
  removeTemp,
  rng,
  type Scenario,
  sha,
  sleep,
  snap,
  Tally,
  tempDir,
  tempsUnder,
} from "./support.ts";

const FILES = 200;
const NODE = "n1";
const ABSENT = "absent";

/** Which apply is killed: the first (files found and held), a change of most files, or the undeclaring one. */
export const VARIANTS = ["first", "change", "undeclare"] as const;
export type Variant = (typeof VARIANTS)[number];

interface FileSpec {
  content: string;
  mode: string;
}

interface Spec {
  decl: object;
  files: Map<string, FileSpec>;
  dirs: Map<string, string>;
}

interface World {
  base: string;
  root: string;
  state: string;
  /** The machine before the mesh: what undeclaring must give back exactly. */
  original: Map<string, string>;
  a: Spec;
  b: Spec;
  none: Spec;
  files: Record<"a" | "b" | "none", string>;
}

const DIRS: [string, string, string][] = [
  ["srv", "/srv", "0755"],
  ["srv-a", "/srv/a", "0755"],
  ["srv-b", "/srv/b", "0711"],
  // found at 0750: the mesh changes its mode, and undeclaring gives the 0750 back
  ["pre", "/pre", "0755"],
];

const pathOf = (prefix: string, i: number) =>
  i % 2 === 0 ? `/pre/${prefix}${i}.conf` : `/srv/${i % 4 === 1 ? "a" : "b"}/${prefix}${i}.conf`;

function text(rand: () => number, head: string): string {
  return `${head}\n${"x".repeat(Math.floor(rand() * 3000))}\n`;
}

function declaration(
  files: [string, string, FileSpec][],
  middleAfter: string,
): { decl: object; files: Map<string, FileSpec>; dirs: Map<string, string> } {
  const resources: object[] = DIRS.map(([id, path, mode]) => ({ id, type: "directory", path, mode }));
  for (const [id, path, f] of files) {
    resources.push({ id, type: "file", path, content: f.content, mode: f.mode });
    if (id === middleAfter)
      resources.push(
        { id: "mid", type: "action", run: ["sh", "-c", "sleep 0.02"] },
        { id: "on-f3", type: "action", on: ["f3"], run: ["true"] },
      );
  }
  // skipped because an earlier step makes it; were it ever run, it would fail the apply
  resources.push({ id: "done", type: "action", creates: "/srv/a/f1.conf", run: ["false"] });
  return {
    decl: { v: 1, node: NODE, mode: "converged", resources },
    files: new Map(files.map(([, p, f]) => [p, f])),
    dirs: new Map(DIRS.map(([, p, m]) => [p, m])),
  };
}

/** A machine with some of the declared files already there (held when taken over), and the three declarations. */
export function makeWorld(rand: () => number): World {
  const base = tempDir("mesh-chaos-apply-");
  const root = join(base, "root");
  const state = join(base, "state");
  mkdirSync(join(root, "pre"), { recursive: true });
  chmodSync(join(root, "pre"), 0o750);
  mkdirSync(join(root, "etc"), { recursive: true });
  writeFileSync(join(root, "etc/hostname"), "the machine's own\n");
  writeFileSync(join(root, "pre/keep.txt"), "never declared, never touched\n");
  const found = [0, 0.3, 0.8][Math.floor(rand() * 3)]!;
  const aFiles: [string, string, FileSpec][] = [];
  for (let i = 0; i < FILES; i++) {
    const spec = { content: text(rand, `A ${i}`), mode: rand() < 0.3 ? "0600" : "0644" };
    aFiles.push([`f${i}`, pathOf("f", i), spec]);
  }
  const bFiles: [string, string, FileSpec][] = [];
  for (const [id, path, spec] of aFiles) {
    const r = rand();
    // f1 and f3 stay: an action is `on` f3, another `creates` f1's path
    if (r < 0.15 && id !== "f1" && id !== "f3") continue;
    bFiles.push([
      id,
      path,
      r < 0.5 ? spec : { content: text(rand, `B ${id}`), mode: rand() < 0.5 ? "0600" : "0644" },
    ]);
  }
  for (let i = 0; i < 20; i++)
    bFiles.push([`g${i}`, pathOf("g", i), { content: text(rand, `B g${i}`), mode: "0644" }]);
  // what the machine held before the mesh: files under /pre, a few already exactly as declared
  const byPath = new Map([...bFiles, ...aFiles].map(([, path, spec]) => [path, spec]));
  for (const [path, spec] of byPath) {
    if (!path.startsWith("/pre/") || rand() >= found) continue;
    const same = rand() < 0.05 && spec.mode === "0644";
    writeFileSync(join(root, path), same ? spec.content : `original of ${path}\n`, { mode: 0o640 });
    chmodSync(join(root, path), same ? 0o644 : 0o640);
  }
  const a = declaration(aFiles, "f99");
  const b = declaration(bFiles, "f101");
  const none: Spec = {
    decl: { v: 1, node: NODE, mode: "converged", owns_nothing: true, resources: [] },
    files: new Map(),
    dirs: new Map(),
  };
  const files = { a: join(base, "a.json"), b: join(base, "b.json"), none: join(base, "none.json") };
  writeFileSync(files.a, JSON.stringify(a.decl));
  writeFileSync(files.b, JSON.stringify(b.decl));
  writeFileSync(files.none, JSON.stringify(none.decl));
  return { base, root, state, original: snap(root), a, b, none, files };
}

/** The machine once `spec` is fully applied from the original: declared entries over what was found. */
function expected(world: World, spec: Spec): Map<string, string> {
  const e = new Map(world.original);
  const mode = (m: string) => Number.parseInt(m, 8).toString(8);
  for (const [p, m] of spec.dirs) e.set(p, `dir ${mode(m)}`);
  for (const [p, f] of spec.files) e.set(p, `file ${mode(f.mode)} ${sha(f.content)}`);
  return e;
}

/** Every entry is the old state's or the new state's; temp files may lie beside them until the next start. */
function oldOrNew(
  now: Map<string, string>,
  before: Map<string, string>,
  after: Map<string, string>,
): string[] {
  const problems: string[] = [];
  const paths = new Set([...before.keys(), ...after.keys(), ...now.keys()]);
  for (const p of paths) {
    const got = now.get(p) ?? ABSENT;
    const old = before.get(p) ?? ABSENT;
    const neu = after.get(p) ?? ABSENT;
    if (got !== old && got !== neu)
      problems.push(
        `${p} is ${got.slice(0, 30)}…: neither old (${old.slice(0, 30)}) nor new (${neu.slice(0, 30)})`,
      );
  }
  return problems;
}

/** The state directory as the next start reads it: every file must parse. */
function stateParses(stateDir: string): string[] {
  const problems: string[] = [];
  const state = new State(stateDir);
  const read = (what: string, fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      problems.push(`${what} does not parse: ${(e as Error).message}`);
    }
  };
  read("records.json", () => state.readRecords());
  read("node.json", () => state.readNode());
  read("last.json", () => state.readLast());
  read("holds/index.json", () => new StoreOriginals(state).list());
  return problems;
}

interface RunDoc {
  report?: { outcome: string; steps: { id: string; did: string; detail: string }[] };
}

/** `mesh-host apply FILE` on the world's root and state, started: the process to wait for or kill. */
function startApply(world: World, file: string) {
  return meshHost(["apply", file, "--root", world.root, "--state", world.state, "--host", "linux", "--json"]);
}

async function applyFile(world: World, file: string): Promise<Exit> {
  return (await startApply(world, file)).exited;
}

/** A full run must exit 0 and say applied: the lock was taken, nothing failed. */
function completed(exit: Exit, what: string): string[] {
  const doc = jsonOf<RunDoc>(exit);
  if (!doc.ok) return [`${what}: ${doc.reason}`];
  if (exit.code !== 0 || doc.doc.report?.outcome !== "applied") {
    const bad =
      doc.doc.report?.steps.filter((s) => s.did === "failed").map((s) => `${s.id}: ${s.detail}`) ?? [];
    return [
      `${what}: exit ${exit.code}, outcome ${doc.doc.report?.outcome}; ${bad.slice(0, 2).join("; ") || describeExit(exit)}`,
    ];
  }
  return [];
}

/** The steps before the killed one, and which declarations it goes from and to. */
function plan(world: World, variant: Variant) {
  if (variant === "first")
    return { pre: [] as string[], from: world.original, to: world.a, file: world.files.a };
  if (variant === "change")
    return { pre: [world.files.a], from: expected(world, world.a), to: world.b, file: world.files.b };
  return { pre: [world.files.a], from: expected(world, world.a), to: world.none, file: world.files.none };
}

/** How long the killed apply runs once it holds the lock, measured on an unkilled one: the window kills land in. */
async function calibrate(variant: Variant, seed: number): Promise<number> {
  const world = makeWorld(rng(seed));
  const p = plan(world, variant);
  for (const f of p.pre) await applyFile(world, f);
  const run = await startApply(world, p.file);
  await awaitLockBy(join(world.state, "lock"), run.pid);
  const seen = performance.now();
  await run.exited;
  removeTemp(world.base);
  return Math.max(20, performance.now() - seen);
}

export interface CrashStats {
  killed: number;
  finishedFirst: number;
  /** Set when the victim finished before the kill: how long it held the lock, the window to aim at next. */
  ranMs?: number;
}

/** One try: pre-steps, the killed apply, the checks after the kill, the next run, the final undeclare. */
export async function crashOnce(
  variant: Variant,
  rand: () => number,
  windowMs: number,
  stats: CrashStats,
  /** When the victim finishes before the kill, stop there (the caller tries again with a better window). */
  retryIfMissed = false,
): Promise<string[]> {
  const world = makeWorld(rand);
  try {
    const p = plan(world, variant);
    for (const f of p.pre) {
      const bad = completed(await applyFile(world, f), "the apply before the crash");
      if (bad.length) return bad;
    }
    const to = expected(world, p.to);
    const victim = await startApply(world, p.file);
    const locked = await awaitLockBy(join(world.state, "lock"), victim.pid);
    const lockedAt = performance.now();
    await sleep(rand() * windowMs);
    const exit = await victim.kill();
    stats.ranMs = undefined;
    if (exit.signal === "SIGKILL") stats.killed++;
    else {
      stats.finishedFirst++;
      stats.ranMs = performance.now() - lockedAt;
      if (!locked || exit.code !== 0)
        return [`the apply to be killed ended on its own: ${describeExit(exit)}`];
      if (retryIfMissed) return [];
    }
    const problems = [
      ...oldOrNew(snap(world.root, { skipTemps: true }), p.from, to),
      ...stateParses(world.state),
    ];
    // the next start: takes the lock from the dead holder and finishes the apply
    const next = await applyFile(world, p.file);
    problems.push(...completed(next, "the next run"));
    problems.push(...diffSnaps(to, snap(world.root)).map((d) => `after the next run: ${d}`));
    problems.push(
      ...tempsUnder(world.state).map((t) => `after the next run, a temp file in the state: ${t}`),
    );
    if (problems.length) return problems;
    if (p.to !== world.none) {
      const undeclare = await applyFile(world, world.files.none);
      problems.push(...completed(undeclare, "the undeclaring run"));
      problems.push(...diffSnaps(world.original, snap(world.root)).map((d) => `after undeclaring: ${d}`));
    }
    const holds = new StoreOriginals(new State(world.state)).list();
    if (holds.length) problems.push(`after undeclaring, ${holds.length} holds remain (${holds[0]!.path}…)`);
    const records = new State(world.state).readRecords();
    if (Object.keys(records.records).length)
      problems.push(
        `after undeclaring, records remain: ${Object.keys(records.records).slice(0, 5).join(", ")}`,
      );
    const blobs = snap(join(world.state, "holds"));
    blobs.delete("/index.json");
    if (blobs.size) problems.push(`after undeclaring, ${blobs.size} held blobs remain in holds/`);
    return problems;
  } finally {
    removeTemp(world.base);
  }
}

export const crashDuringApply: Scenario = {
  key: "crash-apply",
  title: "1 crash during apply (SIGKILL)",
  async run(opts: RunOptions): Promise<Outcome> {
    const tally = new Tally();
    const n = opts.long ? 100 : 20;
    const rand = rng(opts.seed);
    const windows = new Map<Variant, number>();
    for (const v of VARIANTS) windows.set(v, await calibrate(v, opts.seed ^ 0x5eed));
    const ceiling = new Map(VARIANTS.map((v) => [v, windows.get(v)! * 2]));
    const stats: CrashStats = { killed: 0, finishedFirst: 0 };
    const byVariant = new Map<Variant, [number, number]>(VARIANTS.map((v) => [v, [0, 0]]));
    for (let i = 0; i < n; i++) {
      const variant = VARIANTS[i % VARIANTS.length]!;
      const iterSeed = Math.floor(rand() * 2 ** 32);
      // a victim that finishes before its kill proves little: aim again inside the time it actually took
      const ok = await tally.try(`seed ${iterSeed} (${variant})`, async () => {
        for (let attempt = 0; ; attempt++) {
          const last = attempt === 2;
          const problems = await crashOnce(
            variant,
            rng(iterSeed + attempt),
            windows.get(variant)!,
            stats,
            !last,
          );
          const window = windows.get(variant)!;
          // shrink to what a missed victim took; after a kill, widen a little so late instants stay in reach
          windows.set(
            variant,
            stats.ranMs !== undefined
              ? Math.max(20, stats.ranMs)
              : Math.min(window * 1.1, ceiling.get(variant)!),
          );
          if (stats.ranMs === undefined || problems.length || last)
            return problems.map((p) => (attempt ? `(attempt seed ${iterSeed + attempt}) ${p}` : p));
        }
      });
      const counts = byVariant.get(variant)!;
      counts[0]++;
      if (ok) counts[1]++;
      opts.progress?.(`crash-apply ${i + 1}/${n} ${variant}: ${ok ? "held" : "FAILED"}`);
    }
    tally.notes.push(
      `kill window after the lock is taken (ms): ${VARIANTS.map((v) => `${v} ${Math.round(windows.get(v)!)}`).join(", ")}`,
      `${stats.killed} killed mid-apply, ${stats.finishedFirst} finished before the kill`,
      `held by variant: ${VARIANTS.map((v) => `${v} ${byVariant.get(v)![1]}/${byVariant.get(v)![0]}`).join(", ")}`,
    );
    return tally.outcome();
  },
};
