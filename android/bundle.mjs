// The Android build's bundle, importable by tests: the Linux build's esbuild options (build/bundle.mjs) plus one
// plugin that keeps the Arch host's folders out, and the check that proves it from the metafile.
//
// What the plugin does, at resolve time (nothing is edited in src/):
// - src/hosts/arch.ts, the Arch host's appliers, becomes src/hosts/floor-only.ts: the same export, no appliers.
// - Every module in an `arch/` folder of src/ (src/appliers/arch/, src/system/arch/: the Arch host's appliers and
//   drivers; a new one is left out by where it lives, no list to remember) that a shared module still imports
//   (today: the overlay's and WireGuard's surfaces, which `enrol` reads to find a tunnel to take; the `overlay`
//   and `install-service` commands, which cli.ts loads lazily) becomes a stub with the same export names, each a function that refuses with exit 2,
//   "not on an Android host". The stub imports nothing, so nothing behind the real module is reached either.
// - The overlay's files in the state directory (src/store/overlay.ts) become a stub the same way.
// The stubs are never called on Android: `enrol` looks for a tunnel, and the commands hand the appliers the
// overlay's state port, only on a host that has an overlay applier.
import { relative, resolve } from "node:path";
import { bundleOptions, ROOT } from "../build/bundle.mjs";

export { ROOT };

const FLOOR_ONLY = resolve(ROOT, "src/hosts/floor-only.ts");
const ARCH_HOST = resolve(ROOT, "src/hosts/arch.ts");
const NAMESPACE = "android-absent";

/** The Arch host's appliers and what they drive: never in the Android bundle, by the folder they live in. */
const ARCH_ONLY_FOLDERS = /^src\/(appliers|system)\/arch\//;
/** Commands with nothing to do on Android: the overlay's key, and a systemd unit and launcher to install. */
const ARCH_ONLY_COMMANDS = /^src\/cli\/commands\/(overlay|install)\.ts$/;
/** The overlay's files in the state directory: the store's port only a host with an overlay applier is handed. */
const ARCH_ONLY_STATE = /^src\/store\/overlay\.ts$/;

/** The operator's half (`mesh-host mesh …`): a phone is a node, never a mesh's controller. */
const MESH_OPERATOR = /^src\/(mesh|cli\/mesh)\//;

/** A module of the Arch host that must not be in the Android bundle (by its path from the repository root). */
export function isArchOnly(rel) {
  return (
    rel === "src/hosts/arch.ts" ||
    ARCH_ONLY_FOLDERS.test(rel) ||
    ARCH_ONLY_COMMANDS.test(rel) ||
    ARCH_ONLY_STATE.test(rel) ||
    MESH_OPERATOR.test(rel)
  );
}

/**
 * The modules of the Android bundle that must not be there: real files of the Arch host (a stub of one is
 * fine: it carries none of its code). `metafile.inputs` keys are paths relative to the working directory.
 */
export function archModulesIn(metafile, cwd = process.cwd()) {
  return Object.keys(metafile.inputs)
    .filter((key) => !key.includes(":"))
    .map((key) => relative(ROOT, resolve(cwd, key)))
    .filter(isArchOnly);
}

/** The stubs the bundle carries instead of Arch modules, by their paths from the repository root. */
export function stubsIn(metafile) {
  return Object.keys(metafile.inputs)
    .filter((key) => key.startsWith(`${NAMESPACE}:`))
    .map((key) => key.slice(NAMESPACE.length + 1));
}

/**
 * The names a module exports (type-only exports erased), read by esbuild: bundled (packages left out), so an
 * index.ts's `export *` is followed to the names it re-exports. Nothing of it reaches the Android bundle.
 */
async function exportNames(esbuild, file) {
  const r = await esbuild.build({
    entryPoints: [file],
    bundle: true,
    packages: "external",
    write: false,
    metafile: true,
    format: "esm",
    platform: "node",
    logLevel: "silent",
    outdir: "/nonexistent",
  });
  return Object.values(r.metafile.outputs).flatMap((o) => o.exports);
}

function stubSource(rel, names) {
  const args = JSON.stringify(resolve(ROOT, "src/cli/args.ts"));
  const lines = [
    `// ${rel} is not in the Android build: every export refuses.`,
    `import { UsageError } from ${args};`,
    "const absent = (name) =>",
    "  function () {",
    `    throw new UsageError(\`not on an Android host: \${name} (${rel}) is not in the Android build\`);`,
    "  };",
    ...names.map((n) =>
      n === "default"
        ? 'export default absent("default");'
        : `export const ${n} = absent(${JSON.stringify(n)});`,
    ),
    "",
  ];
  return lines.join("\n");
}

/** esbuild plugin: the Android host's bundle (see the top of this file). */
export function androidOnly() {
  return {
    name: "mesh-host-android-only",
    setup(b) {
      b.onResolve({ filter: /\.ts$/ }, (args) => {
        if (args.namespace !== "file" || !args.resolveDir) return undefined;
        const abs = resolve(args.resolveDir, args.path);
        if (abs === ARCH_HOST) return { path: FLOOR_ONLY };
        const rel = relative(ROOT, abs);
        if (!isArchOnly(rel)) return undefined;
        return { path: rel, namespace: NAMESPACE, pluginData: { abs, importer: args.importer } };
      });
      b.onLoad({ filter: /.*/, namespace: NAMESPACE }, async (args) => {
        const names = await exportNames(b.esbuild, args.pluginData.abs);
        return { contents: stubSource(args.path, names), loader: "js", resolveDir: ROOT };
      });
    },
  };
}

/** esbuild options for the Android executable's bundle: the Linux bundle's, with the Android plugin first. */
export function androidBundleOptions({ entry, outfile, version, commit }) {
  const base = bundleOptions({ ...(entry ? { entry } : {}), outfile, version, commit });
  return { ...base, plugins: [androidOnly(), ...base.plugins] };
}
