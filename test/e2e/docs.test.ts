// The README and docs/ say what the executable does: no link between them is broken, every `mesh-host …` line
// in a fenced block is one the executable's own parser takes, docs/commands.md is what the command table makes,
// and docs/declaration.md names and shows every field the vocabulary's schemas take.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { commandsMarkdown } from "../../src/cli/reference.ts";
import { DeclarationHead, RESOURCE_SCHEMAS } from "../../src/vocabulary/index.ts";
import { ensureSea, REPO } from "../support/sea.ts";

const PAGES = ["README.md", ...readdirSync(join(REPO, "docs")).map((f) => `docs/${f}`)].filter((p) =>
  p.endsWith(".md"),
);
const text = (page: string) => readFileSync(join(REPO, page), "utf8");

beforeAll(() => {
  process.env.MESH_HOST_BIN ??= ensureSea();
}, 600_000);

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces made hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

/** The text outside fenced blocks, so a link in a code sample is not read as one. */
const prose = (md: string) => md.replace(/^```[\s\S]*?^```$/gm, "");

function anchors(md: string): Set<string> {
  return new Set(
    [...prose(md).matchAll(/^#{1,6} (.*)$/gm)].map((m) =>
      slug(m[1]!.replace(/`/g, "").replace(/\]\(.*?\)|\[/g, "")),
    ),
  );
}

/** The fenced blocks of a page, with their info string. */
function blocks(md: string): { info: string; body: string }[] {
  return [...md.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ info: m[1]!, body: m[2]! }));
}

/** A shell line's words as sh would split them (quotes, no expansion), up to a redirection, pipe or comment. */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)) {
    const w = m[1] ?? m[2] ?? m[3]!;
    if (m[3] && /^(#|<|>|\||&&|;|2>)/.test(w)) break;
    out.push(w);
  }
  return out;
}

/** Every `mesh-host …` command line in the fenced blocks of `md`: the words after the program. */
function commandLines(md: string): string[][] {
  const found: string[][] = [];
  for (const b of blocks(md).filter((x) => x.info === "sh" || x.info === "")) {
    for (const line of b.body.split("\n")) {
      const w = words(line.replace(/^\$ /, ""));
      const at = w.findIndex((x) => x === "mesh-host" || /^[\w./-]*\/mesh-host$/.test(x));
      // the program itself, or run by one of these (`npm run --silent mesh-host -- …`, `adb shell su … mesh-host`)
      if (at < 0 || (at > 0 && !["sudo", "exec", "npm", "adb"].includes(w[0]!))) continue;
      const rest = w.slice(at + 1);
      found.push(rest[0] === "--" ? rest.slice(1) : rest);
    }
  }
  return found;
}

describe("the README and docs/", () => {
  it("the README is a guide of at most 250 lines", () => {
    expect(text("README.md").split("\n").length).toBeLessThanOrEqual(250);
  });

  it("every link between them resolves, to the file and to the heading it names", () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      for (const m of prose(text(page)).matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        const [file, anchor] = target.split("#");
        const path = file ? join(REPO, dirname(page), file) : join(REPO, page);
        if (!existsSync(path)) broken.push(`${page}: ${target} (no ${relative(REPO, path)})`);
        else if (anchor && path.endsWith(".md") && !anchors(readFileSync(path, "utf8")).has(anchor))
          broken.push(`${page}: ${target} (no heading #${anchor})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("every `mesh-host …` line in a fenced block is one the executable's parser takes", () => {
    const refused: string[] = [];
    let seen = 0;
    for (const page of PAGES)
      for (const argv of commandLines(text(page))) {
        seen++;
        const r = spawnSync(process.env.MESH_HOST_BIN!, [...argv, "--help"], { encoding: "utf8" });
        if (r.status !== 0 || r.stderr)
          refused.push(`${page}: mesh-host ${argv.join(" ")}: ${r.stderr.trim()}`);
      }
    expect(refused).toEqual([]);
    expect(seen).toBeGreaterThan(30);
  });

  it("the check sees a line the parser refuses", () => {
    const [argv] = commandLines("```sh\nmesh-host mesh push web-1 x.json --colour # no such flag\n```\n");
    expect(argv).toEqual(["mesh", "push", "web-1", "x.json", "--colour"]);
    const r = spawnSync(process.env.MESH_HOST_BIN!, [...argv!, "--help"], { encoding: "utf8" });
    expect(r.status).toBe(2);
  });

  it("docs/commands.md is what the command table makes (node build/docs.mjs --reference)", () => {
    expect(text("docs/commands.md")).toBe(`${commandsMarkdown()}\n`);
  });
});

/** A schema's fields, nested ones as `mounts.target`, through lazy, optional, default, pipe and array. */
function fieldsOf(schema: unknown, prefix = ""): string[] {
  let s = schema as { _zod?: { def: Record<string, unknown> } };
  for (let d = s._zod?.def; d; d = s._zod?.def) {
    if (d.type === "lazy") s = (d.getter as () => typeof s)();
    else if (["optional", "default", "nullable", "prefault", "readonly"].includes(d.type as string))
      s = d.innerType as typeof s;
    else if (d.type === "pipe") s = d.in as typeof s;
    else if (d.type === "array") s = d.element as typeof s;
    else break;
  }
  const def = s._zod?.def;
  if (def?.type === "union")
    return [...new Set((def.options as unknown[]).flatMap((o) => fieldsOf(o, prefix)))];
  if (def?.type !== "object") return [];
  return Object.entries(def.shape as Record<string, unknown>).flatMap(([k, v]) => [
    `${prefix}${k}`,
    ...fieldsOf(v, `${prefix}${k}.`),
  ]);
}

/** The keys a JSON value uses, nested ones as `mounts.target` (an array's elements under its own key). */
function keysOf(value: unknown, prefix = ""): string[] {
  if (Array.isArray(value)) return value.flatMap((v) => keysOf(v, prefix));
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => [
    `${prefix}${k}`,
    ...(k === "env" || k === "labels" || k === "secrets" ? [] : keysOf(v, `${prefix}${k}.`)),
  ]);
}

describe("docs/declaration.md, against the schemas in src/vocabulary/", () => {
  const md = text("docs/declaration.md");
  const sections = md.split(/^## /m).slice(1);
  const examples = (section: string) =>
    blocks(section)
      .filter((b) => b.info === "json")
      .map((b) => JSON.parse(b.body) as Record<string, unknown>);
  /** Each resource of an example: the example itself, or each of a whole declaration's. */
  const resourcesIn = (e: Record<string, unknown>) =>
    Array.isArray(e.resources) ? (e.resources as Record<string, unknown>[]) : [e];

  it.each(Object.keys(RESOURCE_SCHEMAS))(
    "`%s`: a section names every field, and its examples use each and parse",
    (type) => {
      const section = sections.find((s) => s.split("\n")[0]!.includes(`\`${type}\``));
      expect(section, `a section headed \`${type}\``).toBeDefined();
      const fields = fieldsOf(RESOURCE_SCHEMAS[type as keyof typeof RESOURCE_SCHEMAS]);
      // id and type are every resource's, said once under "The fields of a declaration"
      for (const f of fields.filter((x) => x !== "id" && x !== "type"))
        expect(section, `${type}: ${f}`).toContain(`\`${f.split(".").at(-1)}\``);
      const used = new Set<string>();
      for (const e of examples(section!))
        for (const r of resourcesIn(e).filter((x) => x.type === type)) {
          const parsed = RESOURCE_SCHEMAS[type as keyof typeof RESOURCE_SCHEMAS].safeParse(r);
          expect(parsed.success, `${type} ${JSON.stringify(r)}: ${parsed.error?.message}`).toBe(true);
          for (const k of keysOf(r)) used.add(k);
        }
      expect(
        fields.filter((f) => !used.has(f)),
        `${type}: fields no example uses`,
      ).toEqual([]);
    },
  );

  it("the declaration's own fields: each named, used by an example, and the examples parse", () => {
    const fields = fieldsOf(DeclarationHead);
    const used = new Set<string>();
    for (const e of sections.flatMap(examples).filter((x) => "resources" in x)) {
      const parsed = DeclarationHead.safeParse(e);
      expect(parsed.success, `${JSON.stringify(e).slice(0, 80)}: ${parsed.error?.message}`).toBe(true);
      // nested ones too (`host.release`): a field of an object field is the declaration's own
      for (const k of keysOf(e)) used.add(k);
    }
    for (const f of fields) expect(md, f).toContain(`\`${f}\``);
    expect(fields.filter((f) => !used.has(f))).toEqual([]);
  });
});
