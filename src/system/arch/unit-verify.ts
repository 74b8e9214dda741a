// A unit file verified by systemd itself before it is swapped in for a working one: systemd loads a unit it
// cannot parse as "bad-setting", and by then the working unit would be gone.
import { randomBytes } from "node:crypto";
import { STATE_DIR_MODE, STATE_FILE_MODE, UNIT_VERIFY_DIR, UNIT_VERIFY_TIMEOUT_MS } from "../../defaults.ts";
import type { Exec } from "../exec.ts";
import { removeTreeAt, writeFileAt } from "../files.ts";
import { C_LOCALE, failureText, UNIT_DIR } from "./systemd.ts";

/**
 * Why systemd would refuse the unit files `units` (unit name → content), or null: `systemd-analyze verify` on
 * them together (a timer beside its service) in a scratch directory under the root, before any of them is
 * swapped in for a working unit. Its own words, the scratch directory named as the unit directory.
 */
export async function unitsProblem(
  root: string,
  exec: Exec,
  units: Record<string, string>,
): Promise<string | null> {
  const dir = `${UNIT_VERIFY_DIR}/mesh-host-verify-${randomBytes(8).toString("hex")}`;
  try {
    // through the root's own walk like every effect: a /var/tmp that is a link out of the root is refused
    for (const [unit, content] of Object.entries(units))
      await writeFileAt(root, `${dir}/${unit}`, Buffer.from(content), {
        mode: STATE_FILE_MODE,
        dirMode: STATE_DIR_MODE,
      });
    const r = await exec.run(
      ["systemd-analyze", "verify", "--man=no", "--", ...Object.keys(units).map((u) => `${dir}/${u}`)],
      { env: C_LOCALE, timeoutMs: UNIT_VERIFY_TIMEOUT_MS },
    );
    if (r.code === 0) return null;
    const names = Object.keys(units);
    let said = failureText(r).replaceAll(`${dir}/`, `${UNIT_DIR}/`);
    // one unit: its name is said once, not again at the front of each of systemd's lines
    if (names.length === 1) said = said.replaceAll(`${names[0]}: `, "");
    return `systemd refuses ${names.join(", ")}: ${said}`;
  } finally {
    removeTreeAt(root, dir);
  }
}
