// The source as a graph, for test/architecture.test.ts: every file's imports (static, re-exports, `import()`), its
// length and its functions' lengths, read with the TypeScript parser (no regex over code), and the rules
// of the layering (architecture.md's table) as a pure function over any graph, so a test can feed it a
// synthetic one and see it refuse an import that runs the wrong way.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import ts from "typescript";

export const ROOT = join(import.meta.dirname, "../..");

/** One import: `from` imports `to` (both paths from the repository root). */
export interface Edge {
  from: string;
  to: string;
}

/** The layers in order, lowest first: a layer imports only the ones it is allowed below. */
export const LAYERS = [
  "durable",
  "vocabulary",
  "store",
  "system",
  "appliers",
  "hosts",
  "apply",
  "link",
  "run",
  "mesh",
  "cli",
] as const;
export type Layer = (typeof LAYERS)[number];

/**
 * Which layer may import which: architecture.md's "knows about" column, each read with what the layers it
 * names know in turn (appliers know system, so what system knows too). The link knows the nats client and
 * the vocabulary it speaks, nothing of the host; the mesh knows the vocabulary and the durable writes and lock
 * only, and of the host's layers only the cli imports it (for `mesh-host mesh …`).
 */
const KNOWS: Record<Layer, readonly Layer[]> = {
  durable: [],
  vocabulary: [],
  store: ["vocabulary", "durable"],
  system: ["store"],
  appliers: ["system", "vocabulary"],
  hosts: ["appliers"],
  apply: ["hosts", "store"],
  link: ["vocabulary"],
  run: ["link", "apply", "store"],
  mesh: ["vocabulary", "durable"],
  cli: ["run", "mesh"],
};

function closure(layer: Layer, seen = new Set<Layer>()): Set<Layer> {
  for (const below of KNOWS[layer]) {
    if (seen.has(below)) continue;
    seen.add(below);
    closure(below, seen);
  }
  return seen;
}

const allowed = {} as Record<Layer, ReadonlySet<Layer>>;
for (const l of LAYERS) allowed[l] = closure(l);
export const ALLOWED: Readonly<Record<Layer, ReadonlySet<Layer>>> = allowed;

/**
 * The leaves beside the layers, which any layer may import and which import no layer: the defaults, the version,
 * and what a command needs at start without loading a layer behind its door (the sanitiser of text shown, errno
 * in words, which host this is).
 */
export const LEAVES = [
  "src/build-info.ts",
  "src/defaults.ts",
  "src/faults.ts",
  "src/flushed.ts",
  "src/host-kind.ts",
  "src/printable.ts",
];

/** The layer of a file under src/, or null for a leaf every layer may import (LEAVES). */
export function layerOf(path: string): Layer | null {
  const parts = path.split("/");
  if (parts[0] !== "src" || parts.length < 3) return null;
  return (LAYERS as readonly string[]).includes(parts[1]!) ? (parts[1] as Layer) : null;
}

/** Why `edge` breaks the layering, or null: a layer below importing one above, or past another layer's index.ts. */
export function edgeProblem(edge: Edge): string | null {
  const from = layerOf(edge.from);
  const to = layerOf(edge.to);
  if (!edge.to.startsWith("src/")) return null;
  if (from === null || to === null || from === to) return null;
  if (!ALLOWED[from].has(to)) return `${from} may not import ${to}`;
  if (!edge.to.endsWith("/index.ts")) return `${to} is reached only through an index.ts`;
  return null;
}

/** Every edge of `edges` that breaks the layering, as "from -> to: why". */
export function layeringProblems(edges: readonly Edge[]): string[] {
  return edges.flatMap((e) => {
    const why = edgeProblem(e);
    return why ? [`${e.from} -> ${e.to}: ${why}`] : [];
  });
}

/** Every .ts file under `dir` (a path from the repository root), sorted. */
export function sourceFiles(dir = "src"): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(join(ROOT, d), { withFileTypes: true })) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) out.push(p);
    }
  };
  walk(dir);
  return out.sort();
}

function parse(path: string, text = readFileSync(join(ROOT, path), "utf8")): ts.SourceFile {
  return ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
}

/** What `path` imports: static imports, re-exports and `import("…")`, resolved to paths from the root. */
export function importsOf(path: string): Edge[] {
  const src = parse(path);
  const specs: string[] = [];
  const visit = (n: ts.Node) => {
    if ((ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) && n.moduleSpecifier)
      specs.push((n.moduleSpecifier as ts.StringLiteral).text);
    if (
      ts.isCallExpression(n) &&
      n.expression.kind === ts.SyntaxKind.ImportKeyword &&
      n.arguments[0] &&
      ts.isStringLiteral(n.arguments[0])
    )
      specs.push(n.arguments[0].text);
    ts.forEachChild(n, visit);
  };
  visit(src);
  return specs
    .filter((s) => s.startsWith("."))
    .map((s) => ({ from: path, to: normalize(relative(ROOT, join(ROOT, dirname(path), s))) }));
}

export const lineCount = (path: string): number =>
  readFileSync(join(ROOT, path), "utf8").split("\n").length - 1;

/** Each function of `path` (declarations, methods, arrows, function expressions) with its length in lines. */
export function functionLengths(path: string): { name: string; lines: number }[] {
  const src = parse(path);
  const out: { name: string; lines: number }[] = [];
  const lineOf = (pos: number) => src.getLineAndCharacterOfPosition(pos).line;
  const visit = (n: ts.Node) => {
    if (
      (ts.isFunctionDeclaration(n) ||
        ts.isMethodDeclaration(n) ||
        ts.isArrowFunction(n) ||
        ts.isFunctionExpression(n) ||
        ts.isConstructorDeclaration(n)) &&
      !returnsRecord(n)
    ) {
      const lines = lineOf(n.getEnd()) - lineOf(n.getStart(src)) + 1;
      out.push({ name: `${path}:${lineOf(n.getStart(src)) + 1} ${nameOf(n)}`, lines });
    }
    ts.forEachChild(n, visit);
  };
  visit(src);
  return out;
}

/**
 * `(x) => ({ decide() {…}, execute() {…} })` or a function whose only statement returns such an object: a
 * record of functions made by a factory, not one function; each of its functions is measured itself.
 */
function returnsRecord(n: ts.Node): boolean {
  let body: ts.Node | undefined = (n as ts.FunctionLikeDeclaration).body;
  if (body && ts.isBlock(body) && body.statements.length === 1) {
    const only = body.statements[0]!;
    body = ts.isReturnStatement(only) ? only.expression : undefined;
  }
  while (body && ts.isParenthesizedExpression(body)) body = body.expression;
  return body !== undefined && ts.isObjectLiteralExpression(body);
}

function nameOf(n: ts.Node): string {
  if ((ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n)) && n.name) return n.name.getText();
  if (ts.isConstructorDeclaration(n)) return "constructor";
  const p = n.parent;
  if (p && ts.isVariableDeclaration(p)) return p.name.getText();
  if (p && ts.isPropertyAssignment(p)) return p.name.getText();
  return "(anonymous)";
}

/** Whether `n` is a name `type`: a property's (`type: …`) or an access's (`r.type`). */
const isTypeName = (n: ts.Node | undefined): boolean =>
  n !== undefined &&
  (((ts.isPropertyAssignment(n) || ts.isPropertySignature(n)) && n.name.getText() === "type") ||
    (ts.isPropertyAccessExpression(n) && n.name.text === "type"));

/** Whether the string literal `n` stands as a resource's type tag where it is, by the code around it. */
function isTypeTag(n: ts.StringLiteral): boolean {
  let p: ts.Node = n.parent;
  // `type: "a" | "b"` and `type: z.literal("a")` / `stepsOf("a")`: climb to what holds the literal
  while (ts.isLiteralTypeNode(p) || ts.isUnionTypeNode(p)) p = p.parent;
  if (ts.isCallExpression(p)) {
    // a step builder's type, or a host asked for the applier of a type
    if (/(^|\.)(stepsOf|appliers\.(has|get))$/.test(p.expression.getText())) return true;
    p = p.parent;
  }
  if (isTypeName(p)) return true;
  if (ts.isBinaryExpression(p) && /^[!=]==?$/.test(p.operatorToken.getText()))
    return isTypeName(p.left === n ? p.right : p.left);
  return ts.isCaseClause(p) && isTypeName(p.parent.parent.expression);
}

/**
 * The resource types of `types` that `path` names as a type's tag: compared with a `.type`, given as a `type:`
 * (a value, a type or a `z.literal`), the type of a step builder (`stepsOf("…")`) or of an applier asked for
 * (`appliers.has("…")`). A literal that happens to
 * spell a type's name elsewhere (`source: "file"`, a stat's `kind: "directory"`) is no tag.
 */
export function typeTagsIn(path: string, types: ReadonlySet<string>): Set<string> {
  const src = parse(path);
  const found = new Set<string>();
  const visit = (n: ts.Node) => {
    if (ts.isStringLiteral(n) && types.has(n.text) && isTypeTag(n)) found.add(n.text);
    ts.forEachChild(n, visit);
  };
  visit(src);
  return found;
}

/**
 * An option key (a client's or a server's, a parameter's default) that holds a timeout, an interval, a wait, a
 * count of tries or a size: `reconnectTimeWait`, `maxReconnectAttempts`, `timeout`, `expires`, `max_bytes`,
 * `ttl`, `timeoutMs`, `max_messages` ...
 */
const LIMIT_KEY =
  /(timeout|time_?wait|wait|expires|interval|delay|ttl|limit|attempts|retries|tries|bytes|age|heartbeat|deadline|grace|^max|_max|Max|Ms$|_ms$|_s$)/i;
/** -1, 0 and 1 say "none", "unlimited" or "one at a time", not a figure to tune: no default names them. */
const SAYS_NONE_OR_ONE = new Set(["-1", "0", "1"]);

/**
 * Where `path` names a timeout or a limit of its own instead of src/defaults.ts's: a `const X_MS =` or `X_S =`
 * declared here, an option key such as `reconnectTimeWait`, `timeout` or `max_bytes` given a number written in
 * place (a property, a destructured or a parameter's default), or a setTimeout/setInterval whose delay is a
 * number written in place (literals only, no name in it).
 * Each as "path const NAME" or "path setTimeout(…, 20)" (no line numbers: they move). `text` stands in for the
 * file's own, so a test can show the rule a synthetic module.
 */
export function ownTimeouts(path: string, text?: string): string[] {
  const src = parse(path, text);
  const out: string[] = [];
  const literalOnly = (e: ts.Node): boolean =>
    ts.isNumericLiteral(e) ||
    (ts.isParenthesizedExpression(e) && literalOnly(e.expression)) ||
    (ts.isBinaryExpression(e) && literalOnly(e.left) && literalOnly(e.right));
  const visit = (n: ts.Node) => {
    if (
      ts.isVariableDeclaration(n) &&
      ts.isIdentifier(n.name) &&
      /^[A-Z][A-Z0-9_]*_(MS|S)$/.test(n.name.text)
    )
      out.push(`${path} const ${n.name.text}`);
    if (
      (ts.isPropertyAssignment(n) || ts.isBindingElement(n) || ts.isParameter(n)) &&
      n.name &&
      (ts.isIdentifier(n.name) || ts.isStringLiteral(n.name)) &&
      LIMIT_KEY.test(n.name.text) &&
      n.initializer &&
      literalOnly(n.initializer) &&
      !SAYS_NONE_OR_ONE.has(n.initializer.getText(src))
    )
      out.push(`${path} ${n.name.text}: ${n.initializer.getText(src)}`);
    if (
      ts.isCallExpression(n) &&
      ts.isIdentifier(n.expression) &&
      (n.expression.text === "setTimeout" || n.expression.text === "setInterval") &&
      n.arguments[1] &&
      literalOnly(n.arguments[1])
    )
      out.push(`${path} ${n.expression.text}(…, ${n.arguments[1].getText(src)})`);
    ts.forEachChild(n, visit);
  };
  visit(src);
  return out;
}

/** Where `path` writes a file or directory mode as a number in place (`0o600`) instead of naming it in src/defaults.ts. */
export function ownModes(path: string, text?: string): string[] {
  const src = parse(path, text);
  const out = new Set<string>();
  const visit = (n: ts.Node) => {
    if (ts.isNumericLiteral(n) && /^0o[0-7]{3}$/i.test(n.getText(src))) out.add(`${path} ${n.getText(src)}`);
    ts.forEachChild(n, visit);
  };
  visit(src);
  return [...out];
}

/** State's generic file methods: a caller outside the store naming a file through them knows the layout. */
const STATE_FILE_METHODS = new Set([
  "readText",
  "writeText",
  "readVersioned",
  "writeVersioned",
  "remove",
  "list",
  "path",
]);

/**
 * Where `path` (outside src/store/) reaches a state file by its name rather than by the store's typed accessors:
 * a `new State(…)` of its own (only the composition root, src/cli/context.ts, makes one), a file named through
 * a state's generic methods (`state.readText("confirmed")`), or a path joined onto the state directory
 * (`join(stateDir, …)`, `join(state.dir, …)`). Each as "path what" (no line numbers: they move).
 */
export function stateFileReaches(path: string, text?: string): string[] {
  const src = parse(path, text);
  const out: string[] = [];
  const isStateDir = (e: ts.Expression) => /(^|\.)(stateDir|state\.dir)$/.test(e.getText(src));
  const visit = (n: ts.Node) => {
    if (ts.isNewExpression(n) && n.expression.getText(src) === "State" && path !== "src/cli/context.ts")
      out.push(`${path} new State(…)`);
    if (ts.isCallExpression(n) && ts.isPropertyAccessExpression(n.expression)) {
      const { expression: receiver, name } = n.expression;
      if (STATE_FILE_METHODS.has(name.text) && /(^|\.)state$/i.test(receiver.getText(src)))
        out.push(`${path} ${receiver.getText(src)}.${name.text}(…)`);
    }
    if (ts.isCallExpression(n) && n.expression.getText(src) === "join" && n.arguments.some(isStateDir))
      out.push(`${path} ${n.getText(src)}`);
    ts.forEachChild(n, visit);
  };
  visit(src);
  return out;
}
