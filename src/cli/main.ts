// The Linux and Arch executable's entry, and its composition root: the commands are handed the Arch appliers, the
// overlay's part of `enrol`, pacman for a packaged release, the Arch-only commands and the operator's half, each
// loaded only when a command needs it. The Android executable's root is main-android.ts.
import { start } from "./start.ts";

start({
  appliers: async (kind) =>
    kind === "arch" ? (await import("../appliers/arch/index.ts")).archAppliers() : {},
  tunnelAtEnrol: async (ctx) => (await import("./commands/enrol-tunnel.ts")).tunnelAtEnrol(ctx),
  overlayStatus: async (ctx) => (await import("./commands/overlay.ts")).overlayShown(ctx),
  installPackage: async (exec, file) =>
    (await import("../system/arch/index.ts")).installPackageFile(exec, file),
  commands: {
    overlay: async (ctx) => (await import("./commands/overlay.ts")).overlayCommand(ctx),
    "install-service": async (ctx) => (await import("./commands/install.ts")).installServiceCommand(ctx),
  },
  mesh: async (argv) => (await import("./mesh/main.ts")).meshMain(argv),
});
