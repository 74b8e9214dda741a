// The generators of scenario 4: bytes, JSON, envelopes and declarations, mostly well-formed so they reach the
// plan, each with hostile values where a field could be attacked, and mutations of envelopes the mesh signed.
import type { KeyObject } from "node:crypto";
import fc from "fast-check";
import { signEnvelope } from "../../src/vocabulary/index.ts";

/** Strings an attacker would try in any field. */
const NASTY = [
  "",
  ".",
  "..",
  "/",
  "//",
  "/..",
  "/etc/../etc/hostname",
  "/a//b",
  "/a/",
  "a",
  "\0",
  "/etc/host\0name",
  "x\ny",
  "\r\n",
  "\u2028",
  "\ud800",
  "\udfff",
  "\u202e",
  "__proto__",
  "constructor",
  "prototype",
  "$(id)",
  "`id`",
  "; rm -rf /",
  "~",
  "../../../../etc/passwd",
  "a".repeat(64),
  "a".repeat(300),
  "é",
  "NaN",
  "-1",
  "0x10",
] as const;

export const nasty: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...NASTY) },
  { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }).map((s) => `${s}\n${s}`) },
);

/** Paths that exist, lead through a link out of the root, are links themselves, or are new. */
const PLACES = [
  "/etc/hostname",
  "/etc/app.conf",
  "/etc",
  "/srv/site/index.html",
  "/srv/site",
  "/srv/new/file",
  "/data",
  "/data/a",
  "/data/sub/x",
  "/out/escape",
  "/out",
  "/link-file",
  "/inside-link",
  "/new/deep/dir/file",
];

export const pathArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...PLACES) },
  {
    weight: 2,
    arbitrary: fc
      .array(
        fc.oneof(
          fc.constantFrom("..", ".", "", "etc", "srv", "out", "link-file", "data", "x"),
          fc.string({ maxLength: 6 }),
        ),
        {
          maxLength: 6,
        },
      )
      .map((segs) => `/${segs.join("/")}`),
  },
  { weight: 1, arbitrary: nasty },
);

export const nameArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("f1", "f2", "d1", "a1", "web", "base-file", "base-dir", "held") },
  { weight: 2, arbitrary: fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,8}$/) },
  { weight: 1, arbitrary: nasty },
);

const modeArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("0644", "0600", "0755", "644", "0700") },
  { weight: 1, arbitrary: fc.constantFrom("07777", "8888", "0o644", "-1", "", "99999") },
  { weight: 1, arbitrary: fc.oneof(fc.integer(), nasty) },
);

const principalArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom("root", "0", "nobody", "nosuchuser", "__proto__", 0, 65534, -1, 4294967295),
  nasty,
);

/** Something that may replace any value: the wrong type, or an attacker's string. */
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  nasty,
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.json().map((t) => JSON.parse(t)),
);

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

function resourceOf(model: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(model, { requiredKeys: ["id", "type"] }).map((r) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(r)) if (v !== undefined) out[k] = v;
    return out;
  });
}

const fileArb = (secretNames: string[]) =>
  resourceOf({
    id: nameArb,
    type: fc.constant("file"),
    path: pathArb,
    content: maybe(fc.oneof(fc.string({ maxLength: 40 }), nasty)),
    content_b64: maybe(fc.oneof(fc.base64String({ maxLength: 40 }), nasty)),
    secret: maybe(fc.oneof(fc.constantFrom(...secretNames), nameArb)),
    mode: maybe(modeArb),
    owner: maybe(principalArb),
    group: maybe(principalArb),
  });

const dirArb = resourceOf({
  id: nameArb,
  type: fc.constant("directory"),
  path: pathArb,
  mode: maybe(modeArb),
  owner: maybe(principalArb),
  purge: maybe(fc.oneof(fc.boolean(), anyValue)),
});

const actionArb = resourceOf({
  id: nameArb,
  type: fc.constant("action"),
  run: fc.oneof(
    fc.array(fc.oneof(fc.constantFrom("true", "/bin/rm", "sh", "-c"), nasty), { maxLength: 4 }),
    anyValue,
  ),
  on: maybe(fc.array(nameArb, { maxLength: 3 })),
  creates: maybe(pathArb),
  timeout_s: maybe(fc.oneof(fc.integer(), fc.double())),
  env: maybe(
    fc.dictionary(
      fc.oneof(fc.constantFrom("PATH", "__proto__", "LD_PRELOAD"), nasty),
      fc.oneof(nasty, anyValue),
      { maxKeys: 3 },
    ),
  ),
});

/** The Arch types and the names the one rule guards (refused on a Linux host, parsed on any other). */
const archArb = fc.oneof(
  resourceOf({
    id: nameArb,
    type: fc.constant("process"),
    name: nameArb,
    exec: fc.array(nasty, { maxLength: 3 }),
  }),
  resourceOf({
    id: nameArb,
    type: fc.constant("service"),
    unit: fc.oneof(nameArb, fc.constant("../x.service")),
  }),
  resourceOf({ id: nameArb, type: fc.constant("package"), name: fc.oneof(nameArb, nasty) }),
);

const oddArb = fc.oneof(
  resourceOf({
    id: nameArb,
    type: fc.oneof(fc.constantFrom("container", "overlay", "symlink", "File", "__proto__"), nasty),
  }),
  anyValue,
);

/** A resource with an extra field an attacker added (an unknown key, perhaps `__proto__`). */
const withExtra = (arb: fc.Arbitrary<Record<string, unknown>>) =>
  fc
    .tuple(arb, fc.oneof(fc.constantFrom("__proto__", "constructor", "extra"), nasty), anyValue)
    .map(([r, k, v]) => {
      const copy = JSON.parse(JSON.stringify(r)) as Record<string, unknown>;
      Object.defineProperty(copy, k, { value: v, enumerable: true, writable: true, configurable: true });
      return copy;
    });

export function resourceArb(secretNames: string[]): fc.Arbitrary<unknown> {
  const plain = fc.oneof(
    { weight: 5, arbitrary: fileArb(secretNames) },
    { weight: 3, arbitrary: dirArb },
    { weight: 2, arbitrary: actionArb },
    { weight: 1, arbitrary: archArb },
  );
  return fc.oneof(
    { weight: 8, arbitrary: plain },
    { weight: 1, arbitrary: withExtra(plain) },
    { weight: 1, arbitrary: oddArb },
  );
}

/** A declaration: usually for this node and well-formed at the top, with hostile resources and secrets. */
export function declarationArb(sealed: Record<string, string>): fc.Arbitrary<Record<string, unknown>> {
  const names = Object.keys(sealed);
  return fc
    .record(
      {
        v: fc.oneof({ weight: 9, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: anyValue }),
        node: fc.oneof(
          { weight: 8, arbitrary: fc.constant("n1") },
          { weight: 1, arbitrary: fc.constant("n2") },
          { weight: 1, arbitrary: nasty },
        ),
        mode: fc.oneof(
          { weight: 8, arbitrary: fc.constant("converged") },
          { weight: 1, arbitrary: fc.constant("adopted") },
          { weight: 1, arbitrary: nasty },
        ),
        owns_nothing: maybe(fc.oneof(fc.boolean(), anyValue)),
        resources: fc.oneof(
          { weight: 9, arbitrary: fc.array(resourceArb(names), { maxLength: 8 }) },
          { weight: 1, arbitrary: anyValue },
        ),
        secrets: maybe(
          fc.oneof(
            fc.constant(sealed),
            fc.dictionary(
              nameArb,
              fc.oneof(fc.constantFrom(...Object.values(sealed)), fc.constant("v1:AAAA:AAAA:AAAA"), nasty),
              { maxKeys: 3 },
            ),
          ),
        ),
        membership: maybe(fc.oneof(fc.constant("v1:AAAA:AAAA:AAAA"), nasty)),
      },
      { requiredKeys: ["v", "node", "mode", "resources"] },
    )
    .map((d) => JSON.parse(JSON.stringify(d)) as Record<string, unknown>);
}

const SAFE_PATHS = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...PLACES) },
  {
    weight: 1,
    arbitrary: fc
      .array(
        fc.constantFrom("etc", "srv", "site", "data", "sub", "new", "x", "out", "link-file", "inside-link"),
        { minLength: 1, maxLength: 4 },
      )
      .map((segs) => `/${segs.join("/")}`),
  },
);
const SAFE_MODES = fc.constantFrom("0644", "0600", "0755", "0700", "0640");

/** Resources that pass the schema: what reaches the plan, against found files, held files and links. */
function cleanResourceArb(secretNames: string[]): fc.Arbitrary<Record<string, unknown>> {
  const content = fc.oneof(
    fc.string({ maxLength: 40 }).map((content) => ({ content })),
    fc.base64String({ maxLength: 40 }).map((content_b64) => ({ content_b64 })),
    fc.constantFrom(...secretNames).map((secret) => ({ secret })),
  );
  const file = fc
    .tuple(SAFE_PATHS, content, maybe(SAFE_MODES), maybe(fc.constantFrom("root", "0", "nobody", 65534)))
    .map(([path, c, mode, owner]) => ({
      type: "file",
      path,
      ...c,
      ...(mode ? { mode } : {}),
      ...(owner !== undefined ? { owner } : {}),
    }));
  const dir = fc
    .tuple(SAFE_PATHS, maybe(SAFE_MODES), fc.boolean())
    .map(([path, mode, purge]) => ({ type: "directory", path, ...(mode ? { mode } : {}), purge }));
  const action = fc
    .tuple(
      fc.constantFrom(["true"], ["sh", "-c", "exit 3"], ["/nonexistent"]),
      maybe(fc.constantFrom(["f1"], ["d1"], ["base-file"])),
      maybe(SAFE_PATHS),
    )
    .map(([run, on, creates]) => ({
      type: "action",
      run,
      ...(on ? { on } : {}),
      ...(creates ? { creates } : {}),
    }));
  return fc
    .tuple(
      nameArb.filter((n) => /^[a-z0-9][a-z0-9._-]*$/.test(n) && n !== "." && n !== ".."),
      fc.oneof(file, file, dir, action),
    )
    .map(([id, r]) => ({ id, ...r }));
}

/** A declaration this node would accept on its face: unique ids and paths, then the plan judges the machine. */
export function cleanDeclarationArb(sealed: Record<string, string>): fc.Arbitrary<Record<string, unknown>> {
  const names = Object.keys(sealed);
  return fc
    .tuple(
      fc.uniqueArray(cleanResourceArb(names), { selector: (r) => r.id, minLength: 1, maxLength: 6 }),
      fc.constantFrom("converged", "adopted"),
    )
    .map(([resources, mode]) => {
      const paths = new Set<unknown>();
      const unique = resources.filter(
        (r) => r.path === undefined || (!paths.has(r.path) && paths.add(r.path)),
      );
      return { v: 1, node: "n1", mode, resources: unique, secrets: sealed };
    });
}

/** A change to an envelope's bytes: a bit flipped, a range cut or repeated, bytes inserted, the end cut off. */
const mutationArb = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), bit: fc.nat(7) }),
  fc.record({ kind: fc.constant("cut" as const), at: fc.nat(), len: fc.integer({ min: 1, max: 16 }) }),
  fc.record({ kind: fc.constant("repeat" as const), at: fc.nat(), len: fc.integer({ min: 1, max: 16 }) }),
  fc.record({
    kind: fc.constant("insert" as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
);
type Mutation = typeof mutationArb extends fc.Arbitrary<infer M> ? M : never;

function mutate(bytes: Buffer, m: Mutation): Buffer {
  const at = bytes.length ? m.at % bytes.length : 0;
  switch (m.kind) {
    case "flip": {
      const copy = Buffer.from(bytes);
      if (copy.length) copy[at] = copy[at]! ^ (1 << m.bit);
      return copy;
    }
    case "cut":
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + m.len)]);
    case "repeat":
      return Buffer.concat([bytes.subarray(0, at + m.len), bytes.subarray(at)]);
    case "insert":
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(m.bytes), bytes.subarray(at)]);
    case "truncate":
      return bytes.subarray(0, at);
  }
}

export interface HostileInput {
  family: string;
  bytes: Uint8Array;
}

/**
 * Every family of input, as the bytes a node would receive. Bodies signed with `meshKey` are recorded in
 * `signed` (their digests), so a check can tell an accepted forgery from an accepted original.
 */
export function inputArb(
  meshKey: KeyObject,
  otherKey: KeyObject,
  sealed: Record<string, string>,
  signed: Set<string>,
  digest: (s: string) => string,
): fc.Arbitrary<HostileInput> {
  const enc = (doc: unknown) => Buffer.from(JSON.stringify(doc));
  const sign = (body: string, key: KeyObject) => {
    if (key === meshKey) signed.add(digest(body));
    return signEnvelope(body, key);
  };
  const decl = declarationArb(sealed);
  const clean = cleanDeclarationArb(sealed);
  return fc.oneof(
    {
      weight: 6,
      arbitrary: clean.map((d) => ({ family: "signed-clean", bytes: enc(sign(JSON.stringify(d), meshKey)) })),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 400 }).map((b) => ({ family: "bytes", bytes: b })) },
    {
      weight: 1,
      arbitrary: fc.json({ maxDepth: 4 }).map((t) => ({ family: "json", bytes: Buffer.from(t) })),
    },
    {
      weight: 1,
      arbitrary: fc
        .record({
          v: fc.oneof(fc.constant(1), anyValue),
          body: fc.oneof(fc.string(), anyValue),
          sig: fc.oneof(fc.base64String({ minLength: 88, maxLength: 88 }), nasty),
        })
        .map((e) => ({ family: "envelope-shaped", bytes: enc(e) })),
    },
    {
      weight: 4,
      arbitrary: decl.map((d) => ({
        family: "signed-hostile",
        bytes: enc(sign(JSON.stringify(d), meshKey)),
      })),
    },
    {
      weight: 1,
      arbitrary: fc
        .oneof(fc.string(), fc.json(), fc.string({ unit: "binary" }))
        .map((body) => ({ family: "signed-text", bytes: enc(sign(body, meshKey)) })),
    },
    {
      weight: 1,
      arbitrary: decl.map((d) => ({ family: "other-key", bytes: enc(sign(JSON.stringify(d), otherKey)) })),
    },
    {
      weight: 3,
      arbitrary: fc
        .tuple(fc.oneof(clean, decl), fc.array(mutationArb, { minLength: 1, maxLength: 3 }))
        .map(([d, ms]) => ({
          family: "mutated",
          bytes: ms.reduce(mutate, enc(sign(JSON.stringify(d), meshKey))),
        })),
    },
  );
}
