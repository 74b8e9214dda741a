// `mesh up --unit`: a systemd unit for each server, each running `mesh up --only I` so the init restarts one
// server (and its share of the controller) alone.
import { join } from "node:path";
import { UNIT_FILE_MODE } from "../defaults.ts";
import { writeAtomic } from "./files.ts";
import type { MeshDir } from "./layout.ts";

export function unitName(i: number): string {
  return `mesh-host-mesh-${i}.service`;
}

export function unitText(mesh: MeshDir, i: number, command: string[]): string {
  const exec = [...command, "mesh", "up", "--mesh", mesh.dir, "--only", String(i)].map(quoted).join(" ");
  return [
    "# Written by `mesh-host mesh up --unit`.",
    "[Unit]",
    `Description=mesh-host mesh: nats-server ${i} and the controller`,
    "After=network-online.target",
    "Wants=network-online.target",
    "",
    "[Service]",
    `ExecStart=${exec}`,
    "Restart=always",
    "RestartSec=2",
    "",
    "[Install]",
    "WantedBy=multi-user.target",
    "",
  ].join("\n");
}

function quoted(arg: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `"${arg.replace(/["\\]/g, "\\$&")}"`;
}

/** The units, one a server (or only `only`), written into `dir`; their paths. */
export function writeUnits(mesh: MeshDir, dir: string, only: number | null, command: string[]): string[] {
  const count = mesh.config().servers.length;
  const indices = only === null ? Array.from({ length: count }, (_, j) => j + 1) : [only];
  return indices.map((i) => {
    const path = join(dir, unitName(i));
    writeAtomic(path, unitText(mesh, i, command), UNIT_FILE_MODE);
    return path;
  });
}
