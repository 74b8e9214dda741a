// The dev-time reader of the packaged files. build/build.mjs replaces this whole module in the bundle with one
// that returns their text (read at build time), so nothing here runs inside the executable.
import { readFileSync } from "node:fs";

export type PackagedFile = "mesh-host.service" | "launch";

export function readPackaged(name: PackagedFile): string {
  return readFileSync(new URL(`./${name}`, import.meta.url), "utf8");
}
