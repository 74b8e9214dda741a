// Scenario 4, hostile input: generated and mutated envelopes and declarations through verify + parse + plan
// (`verifyEnvelope`, then `applyDeclaration` with dryRun) against a root that already holds the mesh's files,
// found files, and links in and out of it. Zero crashes, zero writes, every refusal one line.
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { applyDeclaration } from "../../src/apply/index.ts";
import { unsealerFor } from "../../src/cli/unseal.ts";
import { makeHost } from "../../src/hosts/index.ts";
import { ensureKeys, publicKeys, State, StoreOriginals } from "../../src/store/index.ts";
import { localExec } from "../../src/system/index.ts";
import {
  digestOf,
  makeMeshKey,
  parseDeclaration,
  type Refusal,
  refusalLine,
  seal,
  verifyEnvelope,
} from "../../src/vocabulary/index.ts";
import { type HostileInput, inputArb } from "./hostile-gen.ts";
import { type Outcome, type RunOptions, type Scenario, snap, Tally, tempDir } from "./support.ts";

export const NODE = "n1";
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

/** A refusal a person reads on one line: no line break or control character, the reason at most 300 characters. */
export function lineProblems(refusals: Refusal[]): string[] {
  const problems: string[] = [];
  for (const r of refusals) {
    const line = refusalLine(r);
    if (/[\u0000-\u001f\u007f\u2028\u2029]/.test(line))
      problems.push(`a refusal is not one line: ${JSON.stringify(line).slice(0, 160)}`);
    if (r.reason.length > 300) problems.push(`a refusal's reason is ${r.reason.length} characters`);
    if (line.length > 500)
      problems.push(`a refusal's line is ${line.length} characters: ${line.slice(0, 80)}…`);
  }
  return problems;
}

/** The machine the plans run against: the mesh's own files, found files, a link out of the root, a link at a file. */
export interface Bench {
  base: string;
  root: string;
  state: string;
  outside: string;
  mesh: ReturnType<typeof makeMeshKey>;
  other: ReturnType<typeof makeMeshKey>;
  sealed: Record<string, string>;
  signed: Set<string>;
  /** How many inputs verified and reached the plan. */
  accepted: number;
  /** Measurements worth printing (how fast a huge body is refused). */
  notes: string[];
  /** Everything a check must find unchanged (root, outside, state), with mtimes. */
  look(): string;
  /** verify + parse + plan, exactly as the link would, with dryRun. */
  plan(
    bytes: Uint8Array,
    dryRun?: boolean,
  ): Promise<{
    refusals: Refusal[];
    accepted: boolean;
    digest?: string;
    exit?: number;
    plan?: { id: string; did: string; detail: string }[];
  }>;
}

export async function makeBench(): Promise<Bench> {
  const bench = prepareBench();
  await bench.baseline();
  return bench;
}

/** The bench without its baseline apply: synchronous, so a generator can be built from it at collection time. */
export function prepareBench(): Bench & { baseline(): Promise<void> } {
  const base = tempDir("mesh-chaos-hostile-");
  const root = join(base, "root");
  const state = join(base, "state");
  const outside = join(base, "outside");
  mkdirSync(outside);
  writeFileSync(join(outside, "precious"), "outside the root: never touched\n");
  for (const d of ["etc", "srv/site", "data/sub"]) mkdirSync(join(root, d), { recursive: true });
  writeFileSync(join(root, "etc/hostname"), "found\n");
  writeFileSync(join(root, "etc/passwd"), "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n");
  writeFileSync(join(root, "etc/group"), "root:x:0:\nnobody:x:65534:\n");
  writeFileSync(join(root, "data/a"), "found data\n");
  symlinkSync(outside, join(root, "out"));
  symlinkSync(join(outside, "precious"), join(root, "link-file"));
  symlinkSync("/etc/hostname", join(root, "inside-link"));
  const keys = ensureKeys(state);
  if (!keys.ok) throw new Error(keys.reason);
  const sealingKey = publicKeys(keys.keys).sealing;
  const sealed = {
    db: seal(Buffer.from("hostile-secret"), sealingKey),
    other: seal(Buffer.from("x"), makeMeshKey().publicB64),
  };
  const host = makeHost("linux");
  const st = new State(state);
  const originals = new StoreOriginals(st);
  const ports = { root, exec: localExec(), rootless: process.getuid?.() !== 0, log: quiet };
  // what the mesh already did here: created files and a directory, and took over a found file (held)
  const baseline = parseDeclaration(
    {
      v: 1,
      node: NODE,
      mode: "converged",
      resources: [
        { id: "base-dir", type: "directory", path: "/srv/site", mode: "0755" },
        { id: "base-file", type: "file", path: "/srv/site/index.html", content: "mesh\n" },
        { id: "held", type: "file", path: "/etc/hostname", content: "the mesh's\n", mode: "0644" },
      ],
    },
    host.support,
  );
  if (!baseline.ok) throw new Error(JSON.stringify(baseline.refusals));
  const mesh = makeMeshKey();
  const look = () =>
    JSON.stringify([...snap(base, { mtimes: true, skip: (rel) => rel === "/state/identity" })]);
  return {
    base,
    root,
    state,
    outside,
    mesh,
    other: makeMeshKey(),
    sealed,
    signed: new Set(),
    accepted: 0,
    notes: [],
    look,
    async baseline() {
      const first = await applyDeclaration({
        declaration: baseline.value,
        seq: 1,
        digest: "baseline",
        source: "link",
        dryRun: false,
        host,
        state: st,
        originals,
        ports,
        unseal: unsealerFor(st),
      });
      if (first.exit !== 0) throw new Error(`baseline apply: ${JSON.stringify(first.report.steps)}`);
    },
    async plan(bytes, dryRun = true) {
      const v = verifyEnvelope(bytes, { meshKey: mesh.publicB64, node: NODE, support: host.support });
      if (!v.ok) return { refusals: v.refusals, accepted: false };
      this.accepted++;
      const result = await applyDeclaration({
        declaration: v.declaration,
        seq: 2,
        digest: v.digest,
        source: "link",
        dryRun,
        host,
        state: st,
        originals: new StoreOriginals(st),
        ports,
        unseal: unsealerFor(st),
      });
      const { refusals } = result.report;
      return { refusals, accepted: true, digest: v.digest, exit: result.exit, plan: result.plan };
    },
  };
}

/** One input: it must not throw, must not write, must refuse in one line, and must accept only what was signed. */
export async function checkInput(bench: Bench, input: HostileInput, before: string): Promise<string[]> {
  const problems: string[] = [];
  try {
    const r = await bench.plan(input.bytes);
    problems.push(...lineProblems(r.refusals));
    if (r.accepted && !bench.signed.has(r.digest!)) problems.push("accepted a body the mesh never signed");
  } catch (e) {
    problems.push(`threw: ${(e as Error)?.stack?.split("\n").slice(0, 3).join(" | ")}`);
  }
  if (bench.look() !== before) problems.push("something under the root, outside it, or in the state changed");
  if (({} as Record<string, unknown>).polluted !== undefined || Object.keys(Object.prototype).length)
    problems.push("Object.prototype was polluted");
  return problems.map((p) => `${input.family}: ${p}`);
}

/** A problem without its particulars, to count how many inputs broke each rule. */
function kindOf(problem: string): string {
  return problem
    .replace(/^[a-z-]+: /, "")
    .replace(/:[\s\S]*$/, "")
    .replace(/[0-9]+/g, "N");
}

export function arbitraryFor(bench: Bench): fc.Arbitrary<HostileInput> {
  return inputArb(bench.mesh.privateKey, bench.other.privateKey, bench.sealed, bench.signed, digestOf);
}

export const hostileGenerated: Scenario = {
  key: "hostile-generated",
  title: "4a hostile input, generated (fast-check)",
  async run(opts: RunOptions): Promise<Outcome> {
    // the rule each broken input broke is counted below; a few inputs shown are enough to reproduce
    const tally = new Tally(5);
    const bench = await makeBench();
    const n = opts.long ? 12_000 : 1_000;
    const inputs = fc.sample(arbitraryFor(bench), { numRuns: n, seed: opts.seed | 0 });
    const before = bench.look();
    const families = new Map<string, [number, number]>();
    const kinds = new Map<string, number>();
    let i = 0;
    for (const input of inputs) {
      const counts = families.get(input.family) ?? [0, 0];
      families.set(input.family, counts);
      counts[0]++;
      const label = `input ${i} (seed ${opts.seed}, ${input.family}: ${JSON.stringify(Buffer.from(input.bytes).toString("utf8").slice(0, 160))})`;
      const ok = await tally.try(label, async () => {
        const problems = await checkInput(bench, input, before);
        for (const p of new Set(problems.map(kindOf))) kinds.set(p, (kinds.get(p) ?? 0) + 1);
        return problems;
      });
      if (ok) counts[1]++;
      if (++i % 1000 === 0) opts.progress?.(`hostile ${i}/${n}`);
    }
    tally.notes.push(
      `by family (held/tried): ${[...families].map(([f, [t, h]]) => `${f} ${h}/${t}`).join(", ")}`,
      `${bench.accepted} accepted and planned (signed and well-formed), the rest refused`,
    );
    if (kinds.size)
      tally.notes.push(
        `inputs that broke a rule, by rule: ${[...kinds].map(([k, n]) => `${n} × ${k}`).join("; ")}`,
      );
    return tally.outcome();
  },
};
