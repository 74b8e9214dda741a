// The Android build's bundle, importable by tests: the Linux build's esbuild options (build/bundle.mjs) from the
// Android executable's own entry, and the check that proves the Arch host stays out, from the metafile.
//
// Nothing is swapped or stubbed: src/cli/main-android.ts is the Android executable's composition root, and it
// hands the commands the portable floor only. The Arch appliers and drivers, the overlay, the Arch-only commands
// and the operator's half are named by the Linux root (src/cli/main.ts) alone, so the bundler never reaches them
// from here; a command asking for one refuses in one line (src/cli/cli.ts).
import { relative, resolve } from "node:path";
import { bundleOptions, ROOT } from "../build/bundle.mjs";

export { ROOT };

/** The Android executable's entry and composition root. */
export const ANDROID_ENTRY = resolve(ROOT, "src/cli/main-android.ts");

/** The Arch host's appliers and what they drive: never in the Android bundle, by the folder they live in. */
const ARCH_ONLY_FOLDERS = /^src\/(appliers|system)\/arch\//;
/** Commands with nothing to do on Android: the overlay's key (and its part of enrol), a systemd unit to install. */
const ARCH_ONLY_COMMANDS = /^src\/cli\/commands\/(overlay|install|enrol-tunnel)\.ts$/;

/** The operator's half (`mesh-host mesh …`): a phone is a node, never a mesh's controller. */
const MESH_OPERATOR = /^src\/(mesh|cli\/mesh)\//;

/** A module of the Arch host that must not be in the Android bundle (by its path from the repository root). */
export function isArchOnly(rel) {
  return (
    rel === "src/cli/main.ts" ||
    ARCH_ONLY_FOLDERS.test(rel) ||
    ARCH_ONLY_COMMANDS.test(rel) ||
    MESH_OPERATOR.test(rel)
  );
}

/**
 * The modules of the Android bundle that must not be there. `metafile.inputs` keys are paths relative to the
 * working directory.
 */
export function archModulesIn(metafile, cwd = process.cwd()) {
  return Object.keys(metafile.inputs)
    .filter((key) => !key.includes(":"))
    .map((key) => relative(ROOT, resolve(cwd, key)))
    .filter(isArchOnly);
}

/** esbuild options for the Android executable's bundle: the Linux bundle's, from the Android root. */
export function androidBundleOptions({ entry = ANDROID_ENTRY, outfile, version, commit }) {
  return bundleOptions({ entry, outfile, version, commit });
}
