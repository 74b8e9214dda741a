// mesh-host.rc: the Android init service that starts the host at boot and restarts it on every exit
// (packaging.md "Android"; docs/architecture.md "What the init is asked for": start at boot and restart on exit, nothing else).
//
// Rules this file follows, and test/android/android-rc.test.ts checks from the text:
// - never `oneshot`: init restarts a service without it after any exit (no sooner than `restart_period`, 5 s
//   by default), and the host restarts onto a new binary or bus by exiting 0;
// - never `critical`: four exits in four minutes would reboot the device;
// - `user` and `group` always named, never root (both default to root when left out); `inet` among the groups,
//   or Android's paranoid networking refuses the process a socket and the link never dials;
// - started at boot either by its class (`late_start`: the stock init.rc starts it on `nonencrypted`, once
//   /data is usable) or, `disabled`, by `start mesh-host` on `property:sys.boot_completed=1`;
// - the state directory made by init before the service starts (`on post-fs-data`), owned by the service's
//   user, mode 0700: an unprivileged process cannot make a directory in /data itself;
// - a comment on `seclabel` for enforcing devices: the domain comes from the image's policy (android/sepolicy.mjs
//   writes the fragment: the launcher's or the executable's file label transitions from init), or, on a
//   userdebug or eng image without it, from `--seclabel u:r:su:s0` (a `seclabel` line only when one is given);
// - `stdio_to_kmsg`: init connects a service's stdout and stderr to /dev/null, so the host's log lines go to the
//   kernel log instead (userdebug and eng builds: init enables /dev/kmsg_debug only there);
// - `gentle_kill`: `stop` sends SIGTERM first (the host stops between steps, its writes atomic), SIGKILL 200 ms
//   later (init's fixed grace), instead of SIGKILL at once;
// - with the launcher (the upgrade path): the service runs the launcher itself (its first line names
//   /system/bin/sh), which runs the executable kept under the state directory, `<state>/bin/mesh-host`: /system
//   holds only the launcher, and an upgrade or a rollback is a file the service's user replaces in /data.

export const RC_DEFAULTS = Object.freeze({
  /** Where the executable lives on the device (init's service path must be absolute). */
  binary: "/system/bin/mesh-host",
  state: "/data/mesh-host",
  /** AID_NOBODY: unprivileged and on every device; an OEM AID (config.fs) is better where the image has one. */
  user: "nobody",
  group: "nobody",
  /** `class`: late_start; `boot-completed`: disabled, started once sys.boot_completed=1. */
  start: "class",
  /**
   * The rollback launcher's path on the device, or null: the service runs the executable directly. With it, the
   * executable is `<state>/bin/mesh-host` (dataBinary), which the service's user upgrades in place.
   */
  launcher: null,
  /** An SELinux context for the service (`u:r:<domain>:s0`), or null: left to the image's policy. */
  seclabel: null,
});

export const START_MODES = ["class", "boot-completed"];

/** Where the executable lives when the launcher runs it: under the state directory, writable by the service's user. */
export const dataBinary = (state) => `${state}/bin/mesh-host`;

/** The seclabel that works on a userdebug or eng image with no policy of ours: `su` exists (and is permissive) only there. */
export const USERDEBUG_SECLABEL = "u:r:su:s0";
const NAME = /^[a-z_][a-z0-9_]*$/;
const CONTEXT = /^u:r:[a-z_][a-z0-9_]*:s0$/;

/** Why these options cannot make a valid rc file, or null. */
export function rcProblem(o) {
  for (const key of ["user", "group"]) {
    if (!NAME.test(o[key] ?? "")) return `--${key} must be an Android user or group name, not "${o[key]}"`;
    if (o[key] === "root") return `--${key} must not be root: the host runs without root on Android`;
  }
  if (!START_MODES.includes(o.start))
    return `--start must be one of ${START_MODES.join(", ")}, not "${o.start}"`;
  for (const key of ["binary", "state", "launcher"]) {
    const v = o[key];
    if (v === null && key === "launcher") continue;
    if (typeof v !== "string" || !v.startsWith("/") || /\s/.test(v))
      return `${key} must be an absolute path without spaces, not "${v}"`;
  }
  if (o.seclabel !== null && !CONTEXT.test(o.seclabel))
    return `--seclabel must be a context like u:r:mesh_host:s0, not "${o.seclabel}"`;
  return null;
}

/** The text of mesh-host.rc. Throws on options rcProblem refuses. */
export function rcText(options = {}) {
  const o = { ...RC_DEFAULTS, ...options };
  const problem = rcProblem(o);
  if (problem) throw new Error(problem);
  const groups = o.group === "inet" ? "inet" : `${o.group} inet`;
  // the launcher is exec'd itself, not through /system/bin/sh: init computes the domain from the file it
  // starts, and only the launcher's own label (mesh_host_exec) has a transition from init
  const command = o.launcher ? `${o.launcher} run --state ${o.state}` : `${o.binary} run --state ${o.state}`;
  const lines = [
    "# mesh-host: the agent of a self-hosted mesh, held by Android's init (generated by android/build.mjs).",
    "# It runs without root: file, directory and action under paths its user may write; every other type",
    '# is refused "not on an Android host". No `oneshot`: init restarts it after every exit (no sooner than',
    "# restart_period, 5 s by default), and the host exits 0 to be restarted. Never `critical`: four exits in",
    "# four minutes would reboot the device.",
    "",
    "# The state directory, before the service can start: the service's user cannot make it in /data itself.",
    "on post-fs-data",
    `    mkdir ${o.state} 0700 ${o.user} ${o.group}`,
    ...(o.launcher ? [`    mkdir ${o.state}/bin 0700 ${o.user} ${o.group}`] : []),
    "",
    `service mesh-host ${command}`,
  ];
  // the class groups it with late_start either way (reset together at shutdown); `disabled` keeps
  // `class_start late_start` from starting it, so that only the boot_completed trigger does
  lines.push("    class late_start");
  if (o.start === "boot-completed") lines.push("    disabled");
  lines.push(`    user ${o.user}`, `    group ${groups}`);
  lines.push(
    "    # init connects stdout and stderr to /dev/null: the host's log lines go to the kernel log instead",
    "    # (`adb shell dmesg`; userdebug and eng builds only, where init enables /dev/kmsg_debug)",
    "    stdio_to_kmsg",
    "    # stop: SIGTERM first, SIGKILL 200 ms later, never SIGKILL at once",
    "    gentle_kill",
  );
  if (o.launcher)
    lines.push(
      "    # the rollback launcher counts unconfirmed starts and, after too many, runs the last confirmed copy",
      "    # (kept under the state directory); it execs the executable named here, which the service's user",
      "    # replaces to upgrade (the host notices, exits 0, and init starts the launcher again).",
      `    setenv MESH_HOST_BIN ${dataBinary(o.state)}`,
    );
  lines.push(
    "    # seclabel: on an enforcing device the service needs an SELinux domain of its own: the policy fragment",
    "    # beside this file (sepolicy/) defines mesh_host, labels the file init starts mesh_host_exec and makes",
    "    # init transition to it. Without a seclabel init computes the domain from that label, and refuses to",
    "    # start a service that has no transition from init. On a userdebug or eng image without the policy,",
    `    # \`seclabel ${USERDEBUG_SECLABEL}\` (the build's --seclabel) starts it in the su domain, which exists only there.`,
  );
  if (o.seclabel) lines.push(`    seclabel ${o.seclabel}`);
  else lines.push("    # seclabel u:r:<domain>:s0");
  if (o.start === "boot-completed") lines.push("", "on property:sys.boot_completed=1", "    start mesh-host");
  lines.push("");
  return lines.join("\n");
}
