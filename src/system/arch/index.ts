// system/arch: the Arch host's drivers — systemd (systemctl, unit files, `systemd-analyze verify`), pacman, the
// container runtime (docker or podman, one port over both) and WireGuard (`wg`, `wg-quick`). Each is reached
// only through the exec port and the no-follow file layer below it; none knows a step or a resource's record.
// The Android build leaves this folder out (android/bundle.mjs: every `arch/` folder is the Arch host's).
export * from "./pacman.ts";
export * from "./runtime.ts";
export * from "./systemd.ts";
export * from "./unit-verify.ts";
export * from "./wireguard.ts";
