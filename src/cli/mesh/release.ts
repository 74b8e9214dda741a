// `mesh release add|ls|rm`: the mesh's releases of mesh-host (src/mesh/release.ts). Bad input is one line,
// exit 2, nothing stored.
import { resolve } from "node:path";
import { addRelease, listReleases, type MeshDir, removeRelease } from "../../mesh/index.ts";
import { printable } from "../../printable.ts";
import { ReleaseKind as Kinds, type ReleaseKind } from "../../vocabulary/index.ts";
import { UsageError } from "../args.ts";
import { writeJson, writeOut } from "../output.ts";
import type { MeshArgs } from "./args.ts";

const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

function kindOf(host: string | null): ReleaseKind | undefined {
  if (host === null) return undefined;
  const kind = Kinds.safeParse(host);
  if (!kind.success) throw new UsageError(`--host must be linux, arch or android, not "${printable(host)}"`);
  return kind.data;
}

export async function releaseAddCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [file, ...extra] = args.positionals;
  if (!file || extra.length) throw new UsageError("mesh release add takes one FILE");
  mesh.config();
  const m = await addRelease(mesh, {
    file: resolve(file),
    version: args.version ?? undefined,
    kind: kindOf(args.host),
  });
  writeOut(
    `stored release ${m.version} for ${m.kind}/${m.arch}: ${mib(m.size)}, ${m.encoding} ${mib(m.stored.size)}, sha256 ${m.sha256}`,
  );
  return 0;
}

export async function releaseLsCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  if (args.positionals.length) throw new UsageError("mesh release ls takes no argument");
  mesh.config();
  const rows = await listReleases(mesh);
  if (args.json) {
    writeJson({ releases: rows });
    return 0;
  }
  if (!rows.length) writeOut("no releases stored (`mesh-host mesh release add FILE`)");
  for (const r of rows) {
    const m = r.manifest;
    writeOut(
      m
        ? `${r.name}  ${mib(m.size)}  ${m.encoding} ${mib(r.stored)}  sha256 ${m.sha256}  added ${m.added_at}`
        : `${r.name}  (no manifest: nodes refuse it)`,
    );
  }
  return 0;
}

export async function releaseRmCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [version, ...extra] = args.positionals;
  if (!version || extra.length) throw new UsageError("mesh release rm takes one version V");
  mesh.config();
  for (const name of await removeRelease(mesh, version)) writeOut(`removed release ${name}`);
  return 0;
}
