// The names, paths and unit files a process is run by: derived from its name alone (process.ts says why), so
// the removal finds them from the record without reading anything it could be misled by.
import * as z from "zod";
import { commandLine, unitPath } from "../../system/arch/index.ts";
import type { ProcessResource } from "../../vocabulary/index.ts";
import { recordOf } from "../types.ts";

/** Where every process's bundle lives; a process's own directory is `<BUNDLE_ROOT>/<name>`. */
export const BUNDLE_ROOT = "/var/lib/mesh";

export const bundleDir = (name: string): string => `${BUNDLE_ROOT}/${name}`;
export const serviceUnit = (name: string): string => `mesh-process-${name}.service`;
export const timerUnit = (name: string): string => `mesh-process-${name}.timer`;

export const ProcessRecord = recordOf("process", {
  name: z.string(),
  scheduled: z.boolean(),
  /** Bundle files written, by path inside the bundle, with the digest of what was written. */
  bundle: z.record(z.string(), z.string()),
  /** Digest of the declaration (less its id) last applied: a change it did not ask for is a repair. */
  declared: z.string(),
  /** Found running on an adopted node and held: nothing of it was written, so nothing is removed. */
  held: z.literal(true).optional(),
});
export type ProcessRecord = z.infer<typeof ProcessRecord>;

/** The unit files a process is run by, by declared path. */
export function renderUnits(p: ProcessResource): Record<string, string> {
  const head = `# Written by mesh-host for the process "${p.name}". The mesh owns it and removes it with the process.\n`;
  const scheduled = p.schedule !== undefined;
  const service = [
    head,
    "[Unit]",
    `Description=mesh process ${p.name}`,
    "",
    "[Service]",
    // exec, not simple: `systemctl start` then fails when the program cannot be run, and the report says so
    `Type=${scheduled ? "oneshot" : "exec"}`,
    `WorkingDirectory=${bundleDir(p.name)}`,
    `ExecStart=${commandLine(p.exec)}`,
    ...(scheduled
      ? []
      : ["Restart=on-failure", "RestartSec=5", "", "[Install]", "WantedBy=multi-user.target"]),
    "",
  ].join("\n");
  const units: Record<string, string> = { [unitPath(serviceUnit(p.name))]: service };
  if (scheduled)
    units[unitPath(timerUnit(p.name))] = [
      head,
      "[Unit]",
      `Description=schedule of mesh process ${p.name}`,
      "",
      "[Timer]",
      `OnCalendar=${p.schedule}`,
      "Persistent=true",
      "",
      "[Install]",
      "WantedBy=timers.target",
      "",
    ].join("\n");
  return units;
}
