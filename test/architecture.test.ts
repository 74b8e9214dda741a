// The architecture (docs/architecture.md) as tests: the layering and its doors, the leaves, the operator's half
// kept apart, a new resource type in three files, every timeout and mode named in src/defaults.ts, one version,
// only the store naming state files, and the layering rule itself over a synthetic graph.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { type Applier, type ApplierList, registered } from "../src/appliers/index.ts";
import {
  directoryApplier,
  type FileRecord,
  type FileStep,
  fileApplier,
  PORTABLE_APPLIERS,
} from "../src/appliers/portable/index.ts";
import { BUILD } from "../src/build-info.ts";
import { VERSION } from "../src/defaults.ts";
import { appliersOf } from "../src/hosts/index.ts";
import { enrolPermissions, nodePermissions } from "../src/mesh/index.ts";
import { RESOURCE_SCHEMAS } from "../src/vocabulary/index.ts";
import {
  edgeProblem,
  functionLengths,
  importsOf,
  LEAVES,
  layeringProblems,
  layerOf,
  lineCount,
  ownModes,
  ownTimeouts,
  ROOT,
  sourceFiles,
  stateFileReaches,
  typeTagsIn,
} from "./support/layers.ts";
import {
  changedFiles,
  copyCli,
  copyPush,
  copyWithNewType,
  NEW_TYPE_FILES,
  typecheck,
} from "./support/new-type.ts";

describe("the operator's layer (src/mesh/) and the host's", () => {
  const SRC = join(import.meta.dirname, "../src");
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
    );
  const importsOf = (file: string) =>
    [...readFileSync(file, "utf8").matchAll(/(?:from|import\()\s*"([^"]+)"/g)].map((m) => m[1]!);
  const inMesh = (file: string) => /\/src\/(mesh|cli\/mesh)\//.test(file);

  it("no module of the host's layers imports it: only the CLI (the top layer) does", () => {
    const offenders = files(SRC)
      .filter((f) => !inMesh(f) && !f.includes("/src/cli/"))
      .flatMap((f) =>
        importsOf(f)
          .filter((i) => i.startsWith(".") && inMesh(`${resolve(dirname(f), i)}/`))
          .map((i) => `${relative(SRC, f)} imports ${i}`),
      );
    expect(offenders).toEqual([]);
  });

  it("the CLI loads it only when a mesh command runs (and the man page reads its usage at build time)", () => {
    const offenders = files(join(SRC, "cli"))
      .filter((f) => !inMesh(f))
      .flatMap((f) =>
        importsOf(f)
          .filter((i) => i.startsWith(".") && inMesh(`${resolve(dirname(f), i)}/`))
          .map((i) => `${relative(SRC, f)} imports ${i}`),
      );
    expect([...new Set(offenders)].sort()).toEqual([
      // the Linux executable's composition root hands it to the CLI, to load when a mesh command runs
      "cli/main.ts imports ./mesh/main.ts",
      "cli/manual.ts imports ./mesh/args.ts",
      // docs/commands.md is made from the same usage, at build time and by its test
      "cli/reference.ts imports ./mesh/args.ts",
    ]);
    expect(readFileSync(join(SRC, "cli/main.ts"), "utf8")).not.toMatch(/^import .*\/mesh\//m);
  });

  it("imports only the vocabulary, the durable writes, the leaves (defaults, sanitiser …), Node's built-ins, zod and the nats client", () => {
    const offenders = files(join(SRC, "mesh")).flatMap((f) =>
      importsOf(f)
        .filter(
          (i) =>
            !i.startsWith("node:") &&
            !i.startsWith("@nats-io/") &&
            i !== "zod" &&
            !/^\.\/[a-z-]+\.ts$/.test(i) &&
            !i.startsWith("../vocabulary/") &&
            i !== "../durable/index.ts" &&
            !LEAVES.includes(`src/${i.slice("../".length)}`),
        )
        .map((i) => `${relative(SRC, f)} imports ${i}`),
    );
    expect(offenders).toEqual([]);
  });

  it("grants a node and its enrolling user exactly the fixture's permissions", () => {
    const fixture = JSON.parse(
      readFileSync(join(import.meta.dirname, "fixtures/node-permissions.json"), "utf8"),
    ) as Record<string, unknown>;
    const fill = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll("<n>", "web-1"));
    expect(nodePermissions("web-1")).toEqual(fill(fixture["node.<n>"]));
    expect(nodePermissions("web-1", "consumer")).toEqual(
      fill(fixture["node.<n> enrolled before direct reads"]),
    );
    expect(enrolPermissions("web-1")).toEqual(fill(fixture["enrol.<n>"]));
  });
});

// The layering, held as a test (issue 19): which folder may import which (architecture.md's table, in
// test/support/layers.ts), another layer reached only through its index.ts, no file over 400 lines and no
// function over 60. There is no list of exceptions: a module every layer needs at start (the sanitiser, the
// errno words, the host's kind) is a leaf of its own beside src/defaults.ts, not a door left ajar.

const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 60;

describe("the layering (architecture.md), held over src/", () => {
  const files = sourceFiles();
  const edges = files.flatMap(importsOf);

  it("every import runs downward, into another layer only through its index.ts", () => {
    expect(layeringProblems(edges)).toEqual([]);
  });

  it("a door names what it lets through: no `export *` anywhere, so a layer's surface is read in its index.ts", () => {
    expect(files.filter((f) => /^export (type )?\* from/m.test(readFileSync(join(ROOT, f), "utf8")))).toEqual(
      [],
    );
  });

  it("the leaves beside every layer (src/*.ts) import no layer: each is loaded at start without what is behind one", () => {
    const leaves = files.filter((f) => layerOf(f) === null);
    expect(leaves).toEqual(LEAVES);
    expect(edges.filter((e) => leaves.includes(e.from) && layerOf(e.to) !== null)).toEqual([]);
  });

  it("the drivers (src/system/) know no step: nothing there imports an applier", () => {
    expect(edges.filter((e) => e.from.startsWith("src/system/") && e.to.startsWith("src/appliers/"))).toEqual(
      [],
    );
  });

  it(`no file over ${MAX_FILE_LINES} lines`, () => {
    const long = files
      .map((f) => `${f}: ${lineCount(f)}`)
      .filter((l) => Number(l.split(": ")[1]) > MAX_FILE_LINES);
    expect(long).toEqual([]);
  });

  it(`no function over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = files.flatMap(functionLengths).filter((fn) => fn.lines > MAX_FUNCTION_LINES);
    expect(long).toEqual([]);
  });
});

/** The cycles among `files` by their imports: each as the files around it, from its first. */
function cyclesAmong(files: string[], edges: { from: string; to: string }[]): string[] {
  const next = new Map(files.map((f) => [f, edges.filter((e) => e.from === f).map((e) => e.to)]));
  const found: string[] = [];
  const done = new Set<string>();
  const walk = (f: string, path: string[]) => {
    if (path.includes(f)) return void found.push([...path.slice(path.indexOf(f)), f].join(" -> "));
    if (done.has(f)) return;
    for (const to of next.get(f) ?? []) walk(to, [...path, f]);
    // every way on from here was walked: a cycle through it has been found already
    done.add(f);
  };
  for (const f of files) walk(f, []);
  return found;
}

describe("src/apply/ by job: the trait lookups, the decider, one owner of the records", () => {
  const files = sourceFiles("src/apply");

  it("no file of it (nor of src/appliers/) imports one that imports it back, however far round: a walk through it never returns", () => {
    for (const dir of ["src/apply", "src/appliers"]) {
      const within = sourceFiles(dir);
      const edges = within.flatMap(importsOf).filter((e) => within.includes(e.to));
      expect(cyclesAmong(within, edges)).toEqual([]);
    }
    expect(
      cyclesAmong(
        ["a", "b", "c"],
        [
          { from: "a", to: "b" },
          { from: "b", to: "c" },
          { from: "c", to: "a" },
        ],
      ),
    ).toContain("a -> b -> c -> a");
  });

  it("only records.ts changes a records object or writes the records file", () => {
    const writes = /\bwriteRecords\(|\b(records|next|live|now)\[[^\]]+\]\s*=[^=]|delete \w+\[/;
    const offenders = files.filter(
      (f) => f !== "src/apply/records.ts" && writes.test(readFileSync(join(ROOT, f), "utf8")),
    );
    expect(offenders).toEqual([]);
    expect(writes.test("records[step.id] = done.record;")).toBe(true);
  });
});

/**
 * Outside the vocabulary and the appliers, the files that name a resource type, each a feature about that one
 * type (a new type needs none of them): held like the import exceptions, so the list cannot grow stale.
 */
const TYPE_NAMED_OUTSIDE: Record<string, string> = {
  "src/cli/commands/enrol.ts overlay":
    "enrolment takes a found WireGuard tunnel over only where an overlay is",
  "src/cli/commands/info.ts overlay": "status shows the overlay's interface where the host has one",
};

describe("a new resource type touches three files: its vocabulary, its applier file, the host's list", () => {
  const types = new Set(Object.keys(RESOURCE_SCHEMAS));

  it("src/apply/ and src/hosts/ name no resource type, and nothing outside the vocabulary and the appliers does bar the listed", () => {
    const named = sourceFiles()
      .filter((f) => !/^src\/(vocabulary|appliers)\//.test(f))
      .flatMap((f) => [...typeTagsIn(f, types)].map((t) => `${f} ${t}`));
    expect(named.filter((n) => /^src\/(apply|hosts)\//.test(n))).toEqual([]);
    expect(named.filter((n) => !(n in TYPE_NAMED_OUTSIDE))).toEqual([]);
    expect(Object.keys(TYPE_NAMED_OUTSIDE).filter((k) => !named.includes(k))).toEqual([]);
  });

  it("a host's list takes each applier only registered under its own type: the compiler refuses another (npm run typecheck)", () => {
    // @ts-expect-error: the directory applier listed as the file type's
    const wrong: ApplierList = { file: registered(directoryApplier) };
    // at run time the host keys each by its own type: the file type would silently go without an applier
    expect(appliersOf(wrong).get("file")).toBeUndefined();
    expect(appliersOf(PORTABLE_APPLIERS).get("file")?.type).toBe("file");
    // @ts-expect-error: registered as the file kind's, the directory applier does not check against it
    registered<"file", FileRecord, FileStep>(directoryApplier);
    // @ts-expect-error: no method bivariance: a typed applier never stands as the applier of every kind
    const loose: Applier = fileApplier;
    expect(loose.type).toBe("file");
  });

  it("a registered applier is handed only its own: another kind's resource, record or step is refused, not cast", async () => {
    const file = appliersOf(PORTABLE_APPLIERS).get("file")!;
    const directory = { id: "d", type: "directory", path: "/d", purge: false } as const;
    await expect(file.decide(directory, undefined, {} as never)).rejects.toThrow(
      "the file applier was handed a directory",
    );
    expect(file.check({ type: "file", path: "/f" })).toBeUndefined();
    const dirRecord = { type: "directory", path: "/d" };
    expect(file.traits.pathOf?.(dirRecord)).toBeUndefined();
    const step = { id: "f", type: "file", did: "created", action: "write", detail: "made" } as const;
    expect(await file.execute(step, undefined, undefined, {} as never)).toMatchObject({ did: "failed" });
  });

  it("no applier decides the adopted-mode hold itself: none reads the declaration's mode or a resource's takes (the overlay's takes names a tunnel)", () => {
    const own = sourceFiles()
      .filter((f) => f.startsWith("src/appliers/") && !f.startsWith("src/appliers/arch/overlay/"))
      .filter((f) =>
        /\bctx\.mode\b|\.takes\b|\bmode === "adopted"/.test(readFileSync(join(ROOT, f), "utf8")),
      );
    expect(own).toEqual([]);
  });

  it("a type added in exactly those three files (kind, applier, list) with a path, a unique key, what it makes, a secret, a reference and an adopted hold typechecks, plans, applies, reads back, is refused on a collision, is pushed with --secret, is held as found and given back", async () => {
    const dir = copyWithNewType();
    try {
      expect(changedFiles(dir)).toEqual([...NEW_TYPE_FILES].sort());
      expect(await typecheck(dir)).toBe("");
      const decl = (resources: unknown[], more: object = {}) =>
        JSON.stringify({ v: 1, node: "n1", mode: "converged", resources, ...more });
      const marker = { id: "hello", type: "marker", path: "/srv/hello.txt", text: "hello\n" };
      mkdirSync(join(dir, "root"));
      const flags = ["--root", join(dir, "root"), "--state", join(dir, "state"), "--host", "linux", "--json"];
      const cli = async (resources: unknown[], more: object = {}, extra: string[] = [], verb = "apply") => {
        writeFileSync(join(dir, "d.json"), decl(resources, more));
        return copyCli(dir, [verb, join(dir, "d.json"), ...flags, ...extra]);
      };
      const applied = async (
        resources: unknown[],
        more: object = {},
        extra: string[] = [],
        verb = "apply",
      ) => {
        const r = await cli(resources, more, extra, verb);
        expect(r.code, r.stderr).toBe(0);
        const out = JSON.parse(r.stdout);
        const steps: { id: string; did: string }[] = out.report?.steps ?? out.plan;
        return steps.map((s) => `${s.id} ${s.did}`);
      };
      expect(await applied([marker], {}, [], "plan")).toEqual(["hello created"]);
      expect(existsSync(join(dir, "root/srv/hello.txt"))).toBe(false);
      expect(await applied([marker])).toEqual(["hello created"]);
      expect(readFileSync(join(dir, "root/srv/hello.txt"), "utf8")).toBe("hello\n");
      expect(await applied([marker])).toEqual(["hello unchanged"]);
      // its kind's path collides with a file's, and nothing may be under a file: refused whole, nothing changed
      const file = { id: "f", type: "file", path: "/srv/hello.txt", content: "x" };
      const collided = await cli([file, marker]);
      expect(collided.code).toBe(2);
      expect(collided.stderr).toContain('resource "hello", field "path": is also declared by "f"');
      const under = await cli([{ ...file, path: "/srv" }, marker]);
      expect(under.stderr).toContain(
        'resource "hello", field "path": is under /srv, which "f" declares a file',
      );
      // its kind's unique key: two markers with one label are refused, naming the earlier
      const labelled = await cli([
        { ...marker, label: "greeting" },
        { ...marker, id: "again", path: "/srv/again.txt", label: "greeting" },
      ]);
      expect(labelled.code).toBe(2);
      expect(labelled.stderr).toContain('resource "again", field "label": is also the label of "hello"');
      // what it makes (its kind's madeOf) exists for what comes after it, in a plan before the machine has it
      const creates = { id: "act", type: "action", run: ["/bin/true"], creates: "/srv/made.txt" };
      expect(
        await applied([{ ...marker, id: "made", path: "/srv/made.txt" }, creates], {}, [], "plan"),
      ).toEqual(["made created", "act skipped", "hello removed"]);
      // it names another resource: an undeclared one is refused, a declared one is fine
      const dangling = await cli([{ ...marker, after: ["nope"] }]);
      expect(dangling.code).toBe(2);
      expect(dangling.stderr).toContain(
        'resource "hello", field "after": names "nope", which is not declared',
      );
      const other = { id: "other", type: "directory", path: "/srv/other" };
      expect(await applied([other, { ...marker, after: ["other"] }])).toEqual([
        "other created",
        "hello unchanged",
      ]);
      // it reads a secret: refused when the declaration does not carry it, written when given, never said
      const secret = { ...marker, text: undefined, secret: "token" };
      const missing = await cli([other, secret]);
      expect(missing.stderr).toContain(
        'resource "hello", field "secret": names secret "token", which the declaration does not carry',
      );
      const SECRET = "s3cret-marker-value";
      writeFileSync(join(dir, "token"), SECRET);
      const withSecret = await cli([other, secret], { secrets: { token: "installer" } }, [
        "--secret",
        `token=${join(dir, "token")}`,
      ]);
      expect(withSecret.code, withSecret.stderr).toBe(0);
      expect(readFileSync(join(dir, "root/srv/hello.txt"), "utf8")).toBe(SECRET);
      expect(withSecret.stdout + withSecret.stderr).not.toContain(SECRET);
      // mesh push seals what its kind reads, and refuses a --secret nothing reads
      const pushFile = { v: 1, mode: "converged", resources: [secret] };
      const pushed = await copyPush(dir, pushFile, { token: SECRET });
      expect(pushed.refused).toBeUndefined();
      expect(pushed.opened).toEqual({ token: SECRET });
      expect(JSON.stringify(pushed.body)).not.toContain(SECRET);
      const unread = await copyPush(dir, pushFile, { token: SECRET, other: "x" });
      expect(unread.refused).toBe('--secret other: no resource of the declaration reads secret "other"');
      // undeclared on a converged node: given back (removed), its path gone
      expect(await applied([other])).toEqual(["other unchanged", "hello removed"]);
      expect(existsSync(join(dir, "root/srv/hello.txt"))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it("the new type is held as found on an adopted node, taken only by takes: true, and given back as found", async () => {
    const dir = copyWithNewType();
    try {
      mkdirSync(join(dir, "root/srv"), { recursive: true });
      writeFileSync(join(dir, "root/srv/found.txt"), "the host's\n");
      const flags = ["--root", join(dir, "root"), "--state", join(dir, "state"), "--host", "linux", "--json"];
      const applied = async (resources: unknown[]) => {
        writeFileSync(join(dir, "d.json"), JSON.stringify({ v: 1, node: "n1", mode: "adopted", resources }));
        const r = await copyCli(dir, ["apply", join(dir, "d.json"), ...flags]);
        expect(r.code, r.stderr).toBe(0);
        const steps: { id: string; did: string; detail: string }[] = JSON.parse(r.stdout).report.steps;
        // a hold says "<what> held: found …"; its give-back "<what> left as it was found", as every kind's
        const said = (d: string) =>
          d.includes(" held: ") ? " held" : d.includes("left as it was found") ? " left" : "";
        return steps.map((s) => `${s.id} ${s.did}${said(s.detail)}`);
      };
      const found = { id: "found", type: "marker", path: "/srv/found.txt", text: "the mesh's\n" };
      const fresh = { id: "fresh", type: "marker", path: "/srv/fresh.txt", text: "new\n" };
      expect(await applied([found, fresh])).toEqual(["found unchanged held", "fresh created"]);
      expect(readFileSync(join(dir, "root/srv/found.txt"), "utf8")).toBe("the host's\n");
      // status names it among what the node holds, as it does every kind's hold
      const status = await copyCli(dir, ["status", ...flags]);
      expect(JSON.parse(status.stdout).held).toEqual([{ id: "found", type: "marker", name: "found" }]);
      // held once held, as found
      expect(await applied([found, fresh])).toEqual(["found unchanged held", "fresh unchanged"]);
      expect(readFileSync(join(dir, "root/srv/found.txt"), "utf8")).toBe("the host's\n");
      // undeclared: given back as found, nothing of it touched; the mesh's own is removed
      const steps = await applied([{ id: "d", type: "directory", path: "/srv/d" }]);
      expect(steps).toEqual(["d created", "fresh removed", "found unchanged left"]);
      expect(readFileSync(join(dir, "root/srv/found.txt"), "utf8")).toBe("the host's\n");
      // declared again with takes: true, it is the mesh's
      expect(await applied([{ ...found, takes: true }])).toEqual(["found created", "d removed"]);
      expect(readFileSync(join(dir, "root/srv/found.txt"), "utf8")).toBe("the mesh's\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});

describe("every timeout and mode is named once, in src/defaults.ts (nats.js style)", () => {
  it("no module declares a `_MS`/`_S` constant of its own, gives an option key (`timeout`, `max_bytes` ...) a number, or passes setTimeout/setInterval one", () => {
    const found = sourceFiles()
      .filter((f) => f !== "src/defaults.ts")
      .flatMap((f) => ownTimeouts(f));
    expect(found).toEqual([]);
  });

  it("no module writes a file or directory mode as a number (0o600): each is named there", () => {
    const found = sourceFiles()
      .filter((f) => f !== "src/defaults.ts")
      .flatMap((f) => ownModes(f));
    expect(found).toEqual([]);
    expect(ownModes("src/mesh/synthetic.ts", "chmodSync(p, 0o600); const m = st.mode & 0o7777;")).toEqual([
      "src/mesh/synthetic.ts 0o600",
    ]);
  });

  it("one version, the build's: only src/build-info.ts reads the checkout's, which is package.json's", () => {
    const readers = sourceFiles().filter((f) =>
      /import\s*{[^}]*\bVERSION\b[^}]*}\s*from\s*"[./]*defaults\.ts"/.test(
        readFileSync(join(ROOT, f), "utf8"),
      ),
    );
    expect(readers).toEqual(["src/build-info.ts"]);
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    expect(VERSION).toBe(pkg.version);
    expect(BUILD.version).toBe(VERSION);
  });

  it("only the store names the state directory's files: no State made, file named or path joined outside it", () => {
    const found = sourceFiles()
      .filter((f) => !f.startsWith("src/store/"))
      .flatMap((f) => stateFileReaches(f));
    expect(found).toEqual([]);
    const text = [
      "const ledger = new State(stateDir).readVersioned(LEDGER, LedgerFile);",
      'if (ctx.state.readText("confirmed") !== d) state.writeText("confirmed", d);',
      'const dir = join(stateDir, "overlay-retired"); const r = join(ctx.state.dir, "release");',
      'const ok = ctx.state.readConfirmed(); const p = join(root, "etc");',
    ].join("\n");
    expect(stateFileReaches("src/appliers/synthetic.ts", text)).toEqual([
      "src/appliers/synthetic.ts new State(…)",
      "src/appliers/synthetic.ts ctx.state.readText(…)",
      "src/appliers/synthetic.ts state.writeText(…)",
      'src/appliers/synthetic.ts join(stateDir, "overlay-retired")',
      'src/appliers/synthetic.ts join(ctx.state.dir, "release")',
    ]);
  });

  it("the rule sees a delay written in place, a timeout declared beside its use, and an option key given a number", () => {
    const text = [
      "export const WAIT_MS = 30_000;",
      "function f(ms: number) { const GRACE_S = 5; return ms * GRACE_S; }",
      "await new Promise((r) => setTimeout(r, 20));",
      "setInterval(() => tick(), 5 * 1000);",
      "setTimeout(r, WAIT_MS); setInterval(beat, heartbeatS * 1000); const waitMs = 10;",
      "connect({ reconnectTimeWait: 250, maxReconnectAttempts: 10, timeout: 2 * 1000, reconnect: true });",
      "consumer.fetch({ expires: 30_000, max_bytes: 1024, max_messages: 1 }); const o = { max: -1, ttl: 0 };",
      "exec.run(argv, { timeoutMs: 10_000 }); function f({ retries = 3 } = {}, waitMs = 20) {}",
      "connect({ reconnectTimeWait: RECONNECT_MS, timeout: CONNECT_TIMEOUT_MS, port: 4222 });",
    ].join("\n");
    expect(ownTimeouts("src/mesh/synthetic.ts", text)).toEqual([
      "src/mesh/synthetic.ts const WAIT_MS",
      "src/mesh/synthetic.ts const GRACE_S",
      "src/mesh/synthetic.ts setTimeout(…, 20)",
      "src/mesh/synthetic.ts setInterval(…, 5 * 1000)",
      "src/mesh/synthetic.ts reconnectTimeWait: 250",
      "src/mesh/synthetic.ts maxReconnectAttempts: 10",
      "src/mesh/synthetic.ts timeout: 2 * 1000",
      "src/mesh/synthetic.ts expires: 30_000",
      "src/mesh/synthetic.ts max_bytes: 1024",
      "src/mesh/synthetic.ts timeoutMs: 10_000",
      "src/mesh/synthetic.ts retries: 3",
      "src/mesh/synthetic.ts waitMs: 20",
    ]);
  });
});

describe("the layering rule itself, over a synthetic graph", () => {
  it("refuses an import that runs upward, naming both layers", () => {
    expect(layeringProblems([{ from: "src/store/originals.ts", to: "src/appliers/index.ts" }])).toEqual([
      "src/store/originals.ts -> src/appliers/index.ts: store may not import appliers",
    ]);
    expect(edgeProblem({ from: "src/system/arch/systemd.ts", to: "src/appliers/index.ts" })).toBe(
      "system may not import appliers",
    );
  });

  it("refuses a sideways import the table does not name: the link knows nothing of the host", () => {
    expect(edgeProblem({ from: "src/link/link.ts", to: "src/store/index.ts" })).toBe(
      "link may not import store",
    );
    expect(edgeProblem({ from: "src/run/run-loop.ts", to: "src/mesh/index.ts" })).toBe(
      "run may not import mesh",
    );
    expect(edgeProblem({ from: "src/mesh/push.ts", to: "src/store/index.ts" })).toBe(
      "mesh may not import store",
    );
  });

  it("refuses an import past another layer's index.ts, and takes a folder's own index.ts within the layer", () => {
    expect(edgeProblem({ from: "src/hosts/index.ts", to: "src/appliers/arch/service.ts" })).toBe(
      "appliers is reached only through an index.ts",
    );
    expect(edgeProblem({ from: "src/hosts/index.ts", to: "src/appliers/arch/index.ts" })).toBeNull();
  });

  it("lets a layer import downward, within itself, and the shared defaults", () => {
    const fine = [
      { from: "src/cli/context.ts", to: "src/hosts/index.ts" },
      { from: "src/apply/apply.ts", to: "src/system/index.ts" },
      { from: "src/appliers/arch/service.ts", to: "src/appliers/arch/give-back.ts" },
      { from: "src/vocabulary/json.ts", to: "src/defaults.ts" },
      { from: "src/cli/mesh/init.ts", to: "src/mesh/index.ts" },
    ];
    expect(layeringProblems(fine)).toEqual([]);
  });
});
