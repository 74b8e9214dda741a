// `install-service`: for a machine that got no package, the same unit and launcher the package ships, under --root.
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  renameSync,
} from "node:fs";
import { dirname } from "node:path";
import { ADMIN_UNIT_PATH, launcherText, PACKAGED_PATHS, unitText } from "../../../pkgbuild/embedded.ts";
import { underRoot } from "../../appliers/index.ts";
import { STATE_DIR_MODE } from "../../defaults.ts";
import { acquireLock, fsyncDirSync, tempPathFor, writeFileAtomicSync } from "../../store/index.ts";
import { UsageError } from "../args.ts";
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
  chmodSync(temp, 0o755);
  const fd = openSync(temp, "r");
  fsyncSync(fd);
  closeSync(fd);
  renameSync(temp, target);
  fsyncDirSync(dirname(target));
  return true;
}

export async function installServiceCommand(ctx: Context): Promise<number> {
  if (ctx.args.positionals.length) throw new UsageError("install-service takes no arguments");
  const root = ctx.args.root;
  const at = (p: string) => underRoot(root, p);
  const lock = await acquireLock(ctx.state.ensure().dir);
  try {
    const written: string[] = [];
    for (const [path, text, mode] of [
      [PACKAGED_PATHS.launcher, launcherText(), 0o755],
      [ADMIN_UNIT_PATH, unitText(), 0o644],
    ] as const) {
      mkdirSync(dirname(at(path)), { recursive: true, mode: 0o755 });
      writeFileAtomicSync(at(path), text, mode);
      written.push(path);
    }
    mkdirSync(dirname(at(PACKAGED_PATHS.bin)), { recursive: true, mode: 0o755 });
    const copied = installBinary(at(PACKAGED_PATHS.bin));
    if (copied) written.push(PACKAGED_PATHS.bin);
    if (!existsSync(at(PACKAGED_PATHS.state)))
      mkdirSync(at(PACKAGED_PATHS.state), { recursive: true, mode: STATE_DIR_MODE });
    const doc = {
      written,
      binary: copied ? PACKAGED_PATHS.bin : null,
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
