// `install-service`: for a machine that got no package, the same unit and launcher the package ships, under --root.
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { dirname, isAbsolute, normalize, relative } from "node:path";
import { ADMIN_UNIT_PATH, launcherText, PACKAGED_PATHS, unitTextWith } from "../../../pkgbuild/embedded.ts";
import {
  DEFAULT_ROOT,
  DRIFT_S,
  EXECUTABLE_MODE,
  HEARTBEAT_S,
  MOVE_GRACE_S,
  PACKAGE_DIR_MODE,
  REDIAL_SPREAD_S,
  STATE_DIR_MODE,
  UNIT_FILE_MODE,
} from "../../defaults.ts";
import { commitTempSync, tempPathFor, writeFileAtomicSync } from "../../durable/index.ts";
import { acquireLock } from "../../store/index.ts";
import { underRoot } from "../../system/index.ts";
import { type Args, UsageError } from "../args.ts";
import type { Context } from "../context.ts";
import { writeJson, writeOut } from "../output.ts";
import { runningBinary } from "./confirm.ts";

/** Copy this executable where the unit expects it, atomically: a synced temp file beside it, then a rename. */
function installBinary(target: string): boolean {
  const self = runningBinary();
  if (!self) return false;
  if (self === target) return true;
  const temp = tempPathFor(target);
  copyFileSync(self, temp);
  commitTempSync(temp, target, EXECUTABLE_MODE);
  return true;
}

/** What systemd reads as one word of ExecStart with nothing expanded: no spaces, quotes, `%`, `$` or `\\`. */
const UNIT_WORD = /^[A-Za-z0-9/._+@:,=-]+$/;

/** The state directory as the service will see it: inside --root, the part under it. */
function serviceState(args: Args): string {
  const given = args.state;
  if (!isAbsolute(given))
    throw new UsageError(`--state must be an absolute path for the unit, not "${given}"`);
  if (args.root === DEFAULT_ROOT) return normalize(given);
  const inside = relative(args.root, given);
  if (inside.startsWith("..") || isAbsolute(inside))
    throw new UsageError(
      `--state ${given} is not under --root ${args.root}: the service reads its state from inside that root`,
    );
  return `/${inside}`;
}

/**
 * The arguments `launch run` gets in the unit: every flag of `run` this command was given, so the service runs
 * as it was asked to. The parser already refused (exit 2) any flag install-service does not take (table.ts):
 * it takes exactly run's, and --root and --json, which are about this command's own writing and output.
 */
export function carriedRunArgs(args: Args): string[] {
  const out: string[] = [];
  if (args.stateGiven) {
    const state = serviceState(args);
    if (!UNIT_WORD.test(state))
      throw new UsageError(
        `--state ${state} cannot go into the unit as it is: use letters, digits and / . _ + @ : , = - only`,
      );
    if (state !== PACKAGED_PATHS.state) out.push("--state", state);
  }
  if (args.host) out.push("--host", args.host);
  if (args.logFormat) out.push("--log-format", args.logFormat);
  for (const [flag, value, fallback] of [
    ["--heartbeat-s", args.heartbeatS, HEARTBEAT_S],
    ["--drift-s", args.driftS, DRIFT_S],
    ["--move-grace-s", args.moveGraceS, MOVE_GRACE_S],
    ["--redial-spread-s", args.redialSpreadS, REDIAL_SPREAD_S],
  ] as const)
    if (value !== fallback) out.push(flag, String(value));
  return out;
}

export async function installServiceCommand(ctx: Context): Promise<number> {
  if (ctx.args.positionals.length) throw new UsageError("install-service takes no arguments");
  const root = ctx.args.root;
  const at = (p: string) => underRoot(root, p);
  const runArgs = carriedRunArgs(ctx.args);
  const lock = await acquireLock(ctx.state.ensure().dir);
  try {
    const written: string[] = [];
    for (const [path, text, mode] of [
      [PACKAGED_PATHS.launcher, launcherText(), EXECUTABLE_MODE],
      [ADMIN_UNIT_PATH, unitTextWith(runArgs), UNIT_FILE_MODE],
    ] as const) {
      mkdirSync(dirname(at(path)), { recursive: true, mode: PACKAGE_DIR_MODE });
      writeFileAtomicSync(at(path), text, mode);
      written.push(path);
    }
    mkdirSync(dirname(at(PACKAGED_PATHS.bin)), { recursive: true, mode: PACKAGE_DIR_MODE });
    const copied = installBinary(at(PACKAGED_PATHS.bin));
    if (copied) written.push(PACKAGED_PATHS.bin);
    if (!existsSync(at(PACKAGED_PATHS.state)))
      mkdirSync(at(PACKAGED_PATHS.state), { recursive: true, mode: STATE_DIR_MODE });
    const doc = {
      written,
      binary: copied ? PACKAGED_PATHS.bin : null,
      exec_start: ["/usr/lib/mesh-host/launch", "run", ...runArgs].join(" "),
      enable: "systemctl daemon-reload && systemctl enable --now mesh-host",
    };
    if (ctx.args.json) writeJson(doc);
    else
      writeOut(
        `${written.map((p) => `wrote ${p}`).join("\n")}\n${copied ? "" : `(running from the sources: copy the built executable to ${PACKAGED_PATHS.bin} yourself)\n`}then: ${doc.enable}`,
      );
    return 0;
  } finally {
    lock.release();
  }
}
