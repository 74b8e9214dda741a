// The bundling half of the build, importable by tests: the esbuild options of the executable's bundle, the
// plugin that embeds the packaged unit and launcher, and the check that nothing but built-ins is left external.
import { readFileSync, writeFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const ENTRY = join(ROOT, "src/cli/main.ts");
/** The module replaced in the bundle by the text of the unit and the launcher (see pkgbuild/embedded.ts). */
const EMBEDDED_MODULE = join(ROOT, "pkgbuild/embedded-files.ts");
const EMBEDDED_FILES = ["mesh-host.service", "launch"];

/**
 * esbuild plugin: pkgbuild/embedded-files.ts reads the packaged unit and launcher from disk at dev time; in the
 * bundle the whole module is replaced by one that returns their text, read at build time. (A define with a
 * fallback in one module would leave `import.meta.url` in a CommonJS bundle, where esbuild makes it empty.)
 */
export function embedFiles() {
  return {
    name: "mesh-host-embedded-files",
    setup(b) {
      b.onLoad({ filter: /[\\/]pkgbuild[\\/]embedded-files\.ts$/ }, (args) => {
        if (args.path !== EMBEDDED_MODULE) return undefined;
        const files = Object.fromEntries(
          EMBEDDED_FILES.map((n) => [n, readFileSync(join(ROOT, "pkgbuild", n), "utf8")]),
        );
        return {
          contents: `const FILES = ${JSON.stringify(files)};\nexport function readPackaged(name) {\n  return FILES[name];\n}\n`,
          loader: "js",
          watchFiles: EMBEDDED_FILES.map((n) => join(ROOT, "pkgbuild", n)),
        };
      });
    },
  };
}

/**
 * esbuild plugin: the written bundle is ASCII only. esbuild escapes non-ASCII characters in strings but not in
 * regular expression literals (one is in the NATS client), and a single one makes V8 hold the whole source as a
 * two-byte string, twice its size, for the life of the process. With comments minified away, what is left of
 * them sits in a string, template or regular expression literal, where `\uXXXX` means the same character.
 */
export function asciiOutput() {
  return {
    name: "mesh-host-ascii-output",
    setup(b) {
      b.onEnd(() => {
        const file = b.initialOptions.outfile;
        if (b.initialOptions.write === false || !file) return;
        const text = readFileSync(file, "utf8");
        const ascii = escapeNonAscii(text);
        if (ascii !== text) writeFileSync(file, ascii);
      });
    },
  };
}

/** Every UTF-16 unit above 0x7f as `\uXXXX` (an astral character becomes its two surrogates, as JS reads them). */
export function escapeNonAscii(text) {
  return text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** esbuild options for the executable's bundle: one CommonJS file for Node 24, version and commit defined. */
export function bundleOptions({ entry = ENTRY, outfile, version, commit }) {
  return {
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    target: "node24",
    // A SEA's main script is CommonJS, and its `require` reaches built-in modules only.
    format: "cjs",
    outfile,
    metafile: true,
    legalComments: "none",
    // Whitespace and comments out, syntax shortened, names kept (a MESH_DEBUG stack still names functions): the
    // source V8 keeps in memory and the code cache made from it are a third smaller (1.1 -> 0.8 MB).
    minifyWhitespace: true,
    minifySyntax: true,
    logLevel: "warning",
    // src/build-info.ts reads it; from the sources it is undefined and the version says "dev".
    define: { __MESH_BUILD__: JSON.stringify({ version, commit }) },
    // For files imported as text directly. The unit and the launcher arrive through pkgbuild/embedded.ts
    // instead, which works from the sources too (tsx and vitest cannot import a .service file).
    loader: { ".service": "text", ".sh": "text" },
    plugins: [embedFiles(), asciiOutput()],
  };
}

/** Every module the bundle leaves to `require` at run time. */
export function externalsOf(metafile) {
  const externals = new Set();
  for (const out of Object.values(metafile.outputs))
    for (const i of out.imports) if (i.external) externals.add(i.path);
  return [...externals].sort();
}

/** The externals that are not built into Node: inside a SEA, requiring one fails at run time. */
export function foreignExternals(metafile) {
  return externalsOf(metafile).filter((p) => !p.startsWith("node:") && !isBuiltin(p));
}
