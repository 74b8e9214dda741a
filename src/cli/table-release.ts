// The command table's entries for `mesh release …` (table.ts spreads them into MESH_COMMANDS): apart
// only so the table stays readable; types only are imported back, so nothing here runs before table.ts.
import type { CommandSpec } from "./table.ts";

export const RELEASE_COMMANDS = [
  {
    name: "release add",
    args: "FILE",
    summary: "store a release of mesh-host (executable or Arch package) for the nodes to fetch",
    about:
      "FILE is compressed (zstd, or gzip where this runtime lacks zstd) into the mesh's object store bucket " +
      "mesh-releases, with a manifest signed by the mesh key: version, host kind, processor, the SHA-256 and " +
      'size of FILE. A declaration naming the version (`"host": {"release": "V"}`) makes each node fetch, ' +
      "verify and install the one for its kind and processor, then exit to be restarted onto it.",
    flags: ["version", "host"],
    // `--version V` here, a release's: the host's `--version` is a switch (mesh/args.ts reads it so)
    means: {
      version: {
        value: "V",
        default: "the file's name (mesh-host-V-linux-ARCH, mesh-host-V-REL-ARCH.pkg.tar.zst)",
        help: "the release's version",
      },
      host: {
        value: "KIND",
        default: "arch for a .pkg.tar.zst, else linux",
        help: "the kind of host the release is for",
      },
    },
  },
  { name: "release ls", summary: "the releases stored, with their manifests", flags: ["json"] },
  { name: "release rm", args: "V", summary: "remove release V (every kind and processor)", flags: [] },
] as const satisfies readonly CommandSpec[];
