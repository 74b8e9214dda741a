// Version and commit: injected by the build (esbuild `define`); in a checkout, the sources say "dev".
import { VERSION } from "./defaults.ts";

declare const __MESH_BUILD__: { version: string; commit: string } | undefined;

export const BUILD: { version: string; commit: string } =
  typeof __MESH_BUILD__ !== "undefined" ? __MESH_BUILD__ : { version: VERSION, commit: "dev" };
