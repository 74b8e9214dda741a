// mesh-host.rc, linted as Android's init would read it: the file is parsed into sections (`on`, `service`,
// `import`) and their option or command lines, and each rule packaging.md sets is checked from the parse. The
// lint must pass on every variant the generator makes and fail, naming the rule, on a deliberately broken one.
import { describe, expect, it } from "vitest";
import { RC_DEFAULTS, rcProblem, rcText } from "../../android/rc.mjs";

interface Line {
  words: string[];
  line: number;
}
interface Section extends Line {
  kind: "on" | "service" | "import";
  body: Line[];
}
interface Parsed {
  sections: Section[];
  comments: string[];
  /** Lines before the first section: init ignores them. */
  orphans: Line[];
}

/** init's tokenising, as far as an rc file of ours needs it: whitespace-separated words, `#` comment lines. */
function parseRc(text: string): Parsed {
  const out: Parsed = { sections: [], comments: [], orphans: [] };
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (!line) return;
    if (line.startsWith("#")) {
      out.comments.push(line);
      return;
    }
    const words = line.split(/\s+/);
    const kind = words[0];
    if (kind === "on" || kind === "service" || kind === "import") {
      out.sections.push({ kind, words, line: i + 1, body: [] });
      return;
    }
    const current = out.sections.at(-1);
    (current ? current.body : out.orphans).push({ words, line: i + 1 });
  });
  return out;
}

/**
 * The service options init knows, with the fewest and most arguments each takes: system/core/init's
 * service_parser.cpp, ServiceParser::GetParserMap() (Android 14+, where gentle_kill arrived). Anything else is a
 * typo init refuses ("invalid keyword"), and a wrong count is refused too.
 */
const MAX = Number.POSITIVE_INFINITY;
const SERVICE_OPTIONS = new Map<string, [number, number]>([
  ["capabilities", [0, MAX]],
  ["class", [1, MAX]],
  ["console", [0, 1]],
  ["critical", [0, 2]],
  ["disabled", [0, 0]],
  ["enter_namespace", [2, 2]],
  ["file", [2, 2]],
  ["gentle_kill", [0, 0]],
  ["group", [1, 2048 + 1]],
  ["interface", [2, 2]],
  ["ioprio", [2, 2]],
  ["keycodes", [1, MAX]],
  ["memcg.limit_in_bytes", [1, 1]],
  ["memcg.limit_percent", [1, 1]],
  ["memcg.limit_property", [1, 1]],
  ["memcg.soft_limit_in_bytes", [1, 1]],
  ["memcg.swappiness", [1, 1]],
  ["namespace", [1, 2]],
  ["oneshot", [0, 0]],
  ["onrestart", [1, MAX]],
  ["oom_score_adjust", [1, 1]],
  ["override", [0, 0]],
  ["priority", [1, 1]],
  ["reboot_on_failure", [1, 1]],
  ["restart_period", [1, 1]],
  ["rlimit", [3, 3]],
  ["seclabel", [1, 1]],
  ["setenv", [2, 2]],
  ["shared_kallsyms", [0, 0]],
  ["shutdown", [1, 1]],
  ["sigstop", [0, 0]],
  ["socket", [3, 6]],
  ["stdio_to_kmsg", [0, 0]],
  ["task_profiles", [1, MAX]],
  ["timeout_period", [1, 1]],
  ["updatable", [0, 0]],
  ["user", [1, 1]],
  ["writepid", [1, MAX]],
]);
const ROOTS = new Set(["root", "0"]);
const STATE = RC_DEFAULTS.state;

/** Every rule mesh-host.rc must keep, as problems found (none: it passes). */
function lintRc(text: string): string[] {
  const rc = parseRc(text);
  const problems: string[] = [];
  if (rc.orphans.length)
    problems.push(`lines before the first section are ignored by init: ${rc.orphans[0]!.line}`);
  const services = rc.sections.filter((s) => s.kind === "service");
  const ours = services.filter((s) => s.words[1] === "mesh-host");
  if (ours.length !== 1) return [...problems, `one service mesh-host, not ${ours.length}`];
  const svc = ours[0]!;
  const command = svc.words.slice(2);
  const direct = command.join(" ") === `/system/bin/mesh-host run --state ${STATE}`;
  // the launcher is started itself (its label is what transitions init to the domain), never through a shell
  const launched =
    /^\/system\/bin\/[\w.-]*mesh-host-launch$/.test(command[0] ?? "") &&
    command.slice(1).join(" ") === `run --state ${STATE}`;
  if (!direct && !launched)
    problems.push(`the service runs "${command.join(" ")}", not /system/bin/mesh-host run --state ${STATE}`);
  const options = new Map<string, string[][]>();
  for (const o of svc.body) {
    const name = o.words[0]!;
    const arity = SERVICE_OPTIONS.get(name);
    if (!arity) problems.push(`unknown service option "${name}" (line ${o.line})`);
    else if (o.words.length - 1 < arity[0] || o.words.length - 1 > arity[1])
      problems.push(
        `${name} takes ${arity[0]} to ${arity[1]} arguments, not ${o.words.length - 1} (line ${o.line})`,
      );
    options.set(name, [...(options.get(name) ?? []), o.words.slice(1)]);
  }
  if (!options.has("stdio_to_kmsg"))
    problems.push("no stdio_to_kmsg: init sends the host's log lines to /dev/null");
  if (!options.has("gentle_kill")) problems.push("no gentle_kill: stop would SIGKILL the host at once");
  if (options.has("console") && options.has("stdio_to_kmsg"))
    problems.push("console and stdio_to_kmsg: init refuses the two together");
  if (options.has("oneshot")) problems.push("oneshot: init would not restart it after an exit");
  if (options.has("critical")) problems.push("critical: four exits in four minutes would reboot the device");
  const user = options.get("user")?.[0]?.[0];
  if (!user) problems.push("no user: init runs it as root");
  else if (ROOTS.has(user)) problems.push("user root: the host runs without root");
  const groups = options.get("group")?.[0] ?? [];
  if (!groups.length) problems.push("no group: init runs it as group root");
  else {
    if (ROOTS.has(groups[0]!)) problems.push("group root: the host runs without root");
    if (!groups.includes("inet")) problems.push("no inet group: Android refuses the process a socket");
  }
  const classes = options.get("class")?.[0] ?? [];
  const disabled = options.has("disabled");
  const bootCompleted = rc.sections.some(
    (s) =>
      s.kind === "on" &&
      s.words.slice(1).join(" ") === "property:sys.boot_completed=1" &&
      s.body.some((c) => c.words.join(" ") === "start mesh-host"),
  );
  if (disabled && !bootCompleted)
    problems.push("disabled, and nothing starts it: add `start mesh-host` on property:sys.boot_completed=1");
  if (!disabled && !classes.some((c) => ["late_start", "main", "core"].includes(c)))
    problems.push("no class that starts at boot (late_start, main or core), and not started by a trigger");
  if (launched) {
    const bin = `${STATE}/bin/mesh-host`;
    if (!options.get("setenv")?.some(([k, v]) => k === "MESH_HOST_BIN" && v === bin))
      problems.push(`the launcher is not told the executable: setenv MESH_HOST_BIN ${bin}`);
    const madeBin = rc.sections
      .filter((s) => s.kind === "on" && s.words[1] === "post-fs-data")
      .flatMap((s) => s.body)
      .some((c) => c.words.slice(0, 2).join(" ") === `mkdir ${STATE}/bin`);
    if (!madeBin) problems.push(`${STATE}/bin is never made: the upgrade path keeps the executable there`);
  }
  if (!rc.comments.some((c) => /\bseclabel\b/.test(c) && /\benforcing\b/.test(c)))
    problems.push("no comment on seclabel for enforcing devices");
  const made = rc.sections
    .filter((s) => s.kind === "on" && s.words[1] === "post-fs-data")
    .flatMap((s) => s.body)
    .find((c) => c.words[0] === "mkdir" && c.words[1] === STATE);
  if (!made) problems.push(`${STATE} is never made: the service's user cannot make it in /data`);
  else if (made.words.slice(2).join(" ") !== `0700 ${user} ${groups[0]}`)
    problems.push(`${STATE} is made "${made.words.slice(2).join(" ")}", not 0700 ${user} ${groups[0]}`);
  return problems;
}

const DEFAULT_RC = rcText();

describe("mesh-host.rc as generated", () => {
  it("by default is packaging.md's service: the executable run with the state, class late_start, nobody with inet", () => {
    expect(lintRc(DEFAULT_RC)).toEqual([]);
    const rc = parseRc(DEFAULT_RC);
    const svc = rc.sections.find((s) => s.kind === "service")!;
    expect(svc.words.join(" ")).toBe("service mesh-host /system/bin/mesh-host run --state /data/mesh-host");
    expect(svc.body.map((o) => o.words.join(" "))).toEqual([
      "class late_start",
      "user nobody",
      "group nobody inet",
      "stdio_to_kmsg",
      "gentle_kill",
    ]);
    expect(rc.sections.map((s) => s.words.join(" "))).toEqual([
      "on post-fs-data",
      "service mesh-host /system/bin/mesh-host run --state /data/mesh-host",
    ]);
  });

  const variants: [string, Parameters<typeof rcText>[0]][] = [
    ["--user and --group", { user: "shell", group: "shell" }],
    ["a disabled service started on sys.boot_completed=1", { start: "boot-completed" }],
    [
      "the launcher (the upgrade path), its domain from the policy fragment",
      { launcher: "/system/bin/mesh-host-launch" },
    ],
    [
      "the launcher on a userdebug image",
      { launcher: "/system/bin/mesh-host-launch", seclabel: "u:r:su:s0" },
    ],
    ["a seclabel", { seclabel: "u:r:mesh_host:s0", start: "boot-completed" }],
  ];
  it.each(variants)("passes the lint with %s", (_what, options) => {
    const text = rcText(options);
    expect(lintRc(text)).toEqual([]);
    const user = options?.user ?? "nobody";
    expect(text).toContain(`\n    user ${user}\n`);
    expect(text).toContain(`mkdir /data/mesh-host 0700 ${user} ${options?.group ?? "nobody"}\n`);
  });

  it("the generator refuses what would break a rule: root, a bad name, a malformed seclabel", () => {
    expect(() => rcText({ user: "root" })).toThrow(/must not be root/);
    expect(() => rcText({ group: "root" })).toThrow(/must not be root/);
    expect(() => rcText({ user: "no body" })).toThrow(/user or group name/);
    expect(() => rcText({ start: "never" as "class" })).toThrow(/--start/);
    expect(() => rcText({ seclabel: "system_server" })).toThrow(/--seclabel/);
    expect(rcProblem({ ...RC_DEFAULTS })).toBeNull();
  });
});

describe("the lint fails a broken mesh-host.rc, naming the rule", () => {
  const swap = (from: string, to: string) => (text: string) => {
    expect(text).toContain(from);
    return text.replace(from, to);
  };
  const broken: [string, (text: string) => string, RegExp][] = [
    ["oneshot", swap("    class late_start\n", "    class late_start\n    oneshot\n"), /^oneshot/],
    ["critical", swap("    class late_start\n", "    class late_start\n    critical\n"), /^critical/],
    ["no user", swap("    user nobody\n", ""), /^no user/],
    ["user root", swap("    user nobody\n", "    user root\n"), /^user root/],
    ["no group", swap("    group nobody inet\n", ""), /^no group/],
    ["group root", swap("    group nobody inet\n", "    group root inet\n"), /^group root/],
    ["no inet", swap("    group nobody inet\n", "    group nobody\n"), /^no inet group/],
    ["no class", swap("    class late_start\n", ""), /^no class that starts at boot/],
    ["a class nothing starts", swap("class late_start", "class mesh"), /^no class that starts at boot/],
    [
      "disabled with no trigger",
      swap("    class late_start\n", "    class late_start\n    disabled\n"),
      /^disabled/,
    ],
    [
      "no seclabel comment",
      (t) =>
        t
          .split("\n")
          .filter((l) => !l.includes("seclabel"))
          .join("\n"),
      /^no comment on seclabel/,
    ],
    ["a misspelt option", swap("    user nobody\n", "    usr nobody\n"), /^unknown service option "usr"/],
    [
      "another command",
      swap("/system/bin/mesh-host run --state /data/mesh-host", "/system/bin/mesh-host run"),
      /^the service runs/,
    ],
    ["no state directory", swap("    mkdir /data/mesh-host 0700 nobody nobody\n", ""), /is never made/],
    [
      "a state directory the user does not own",
      swap("mkdir /data/mesh-host 0700 nobody nobody", "mkdir /data/mesh-host 0700 root root"),
      /is made "0700 root root"/,
    ],
    ["an option before any section", (t) => `    user nobody\n${t}`, /^lines before the first section/],
    ["no stdio_to_kmsg", swap("    stdio_to_kmsg\n", ""), /^no stdio_to_kmsg/],
    ["no gentle_kill", swap("    gentle_kill\n", ""), /^no gentle_kill/],
    [
      "gentle_kill given an argument",
      swap("    gentle_kill\n", "    gentle_kill 5\n"),
      /^gentle_kill takes 0 to 0/,
    ],
    [
      "a console as well",
      swap("    gentle_kill\n", "    gentle_kill\n    console\n"),
      /^console and stdio_to_kmsg/,
    ],
    ["user with two names", swap("    user nobody\n", "    user nobody shell\n"), /^user takes 1 to 1/],
    ["two services", (t) => `${t}\nservice mesh-host /system/bin/mesh-host run\n`, /^one service mesh-host/],
  ];
  it.each(broken)("%s", (_what, breakIt, rule) => {
    const problems = lintRc(breakIt(DEFAULT_RC));
    expect(problems.length, problems.join("; ")).toBeGreaterThan(0);
    expect(
      problems.some((p) => rule.test(p)),
      problems.join("; "),
    ).toBe(true);
  });

  it("the launcher variant through a shell, without its setenv, or without its bin directory", () => {
    const text = rcText({ launcher: "/system/bin/mesh-host-launch" });
    expect(lintRc(text.replace(/ {4}setenv .*\n/, ""))).toEqual([
      expect.stringMatching(/^the launcher is not told the executable/),
    ]);
    expect(
      lintRc(
        text.replace(
          "mesh-host /system/bin/mesh-host-launch",
          "mesh-host /system/bin/sh /system/bin/mesh-host-launch",
        ),
      ),
    ).toEqual([expect.stringMatching(/^the service runs "\/system\/bin\/sh/)]);
    expect(lintRc(text.replace(/ {4}mkdir \/data\/mesh-host\/bin .*\n/, ""))).toEqual([
      expect.stringMatching(/\/bin is never made/),
    ]);
  });
});
