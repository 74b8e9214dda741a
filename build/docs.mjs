#!/usr/bin/env node
// `node build/docs.mjs [DIR]` (and every `npm run build`): the man pages and the bash and zsh completions, made
// from the cli's own command table (src/cli/manual.ts), so they cannot drift from what the executable takes.
// Writes DIR/mesh-host.1, DIR/mesh-host-mesh.1, DIR/completions/mesh-host.bash and DIR/completions/_mesh-host
// (DIR: dist/). `node build/docs.mjs --reference` writes docs/commands.md from the same table instead.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import * as esbuild from "esbuild";
import { ROOT } from "./bundle.mjs";

/** The manual module, bundled to one ES module beside the build (it is TypeScript) and imported from there. */
async function manualModule() {
  const outfile = join(ROOT, "dist", ".build", `manual-${process.pid}.mjs`);
  await esbuild.build({
    entryPoints: [join(ROOT, "src/cli/manual.ts")],
    bundle: true,
    format: "esm",
    platform: "node",
    // what the table reaches of the operator's side loads from node_modules as it is, not bundled here
    packages: "external",
    outfile,
    logLevel: "error",
  });
  try {
    return await import(pathToFileURL(outfile).href);
  } finally {
    rmSync(outfile, { force: true });
  }
}

function writeAtomic(path, text) {
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, text, { mode: 0o644 });
  renameSync(temp, path);
}

/** The three files under `dir`; returns their paths. */
export async function writeDocs(dir) {
  const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const manual = await manualModule();
  mkdirSync(join(dir, "completions"), { recursive: true });
  const out = {
    man: join(dir, "mesh-host.1"),
    meshMan: join(dir, "mesh-host-mesh.1"),
    bash: join(dir, "completions", "mesh-host.bash"),
    zsh: join(dir, "completions", "_mesh-host"),
  };
  writeAtomic(out.man, manual.manPage(version));
  writeAtomic(out.meshMan, manual.meshManPage(version));
  writeAtomic(out.bash, manual.bashCompletion());
  writeAtomic(out.zsh, manual.zshCompletion());
  return out;
}

/** docs/commands.md, from the command table; returns its path. */
export async function writeReference() {
  const path = join(ROOT, "docs", "commands.md");
  writeAtomic(path, `${(await manualModule()).commandsMarkdown()}\n`);
  return path;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const made =
    process.argv[2] === "--reference"
      ? [await writeReference()]
      : Object.values(await writeDocs(process.argv[2] ?? join(ROOT, "dist")));
  process.stdout.write(`docs: ${made.join(", ")}\n`);
}
