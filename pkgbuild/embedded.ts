// What `mesh-host install-service` writes on a machine that got no package: the same unit and launcher the
// package ships, and where the package puts them. From the sources (tsx, vitest) the text is read from the files
// beside this one; in the executable, build/build.mjs replaces ./embedded-files.ts with their text, so the
// executable carries both and reads no file of its own.
import { readPackaged } from "./embedded-files.ts";

/** The package's layout (packaging.md); install-service resolves each under --root. */
export const PACKAGED_PATHS = {
  bin: "/usr/bin/mesh-host",
  launcher: "/usr/lib/mesh-host/launch",
  unit: "/usr/lib/systemd/system/mesh-host.service",
  state: "/var/lib/mesh-host",
} as const;

/** Where a unit goes that no package owns (systemd's administrator directory; it wins over /usr/lib). */
export const ADMIN_UNIT_PATH = "/etc/systemd/system/mesh-host.service";

export const UNIT_NAME = "mesh-host.service";

/** The systemd unit: ExecStart=/usr/lib/mesh-host/launch run, Restart=always, no start limit. */
export function unitText(): string {
  return readPackaged("mesh-host.service");
}

const EXEC_START = "ExecStart=/usr/lib/mesh-host/launch run";

/** The unit with `run` given these arguments (each already fit for a unit file: install-service checks them). */
export function unitTextWith(runArgs: readonly string[]): string {
  const text = unitText();
  if (!text.includes(`${EXEC_START}\n`)) throw new Error(`the packaged unit has no "${EXEC_START}" line`);
  return runArgs.length ? text.replace(`${EXEC_START}\n`, `${[EXEC_START, ...runArgs].join(" ")}\n`) : text;
}

/** The rollback launcher (POSIX sh, mode 0755); its header documents the files it keeps in the state directory. */
export function launcherText(): string {
  return readPackaged("launch");
}
