// mesh-host.rc, linted as Android's init would read it: the file is parsed into sections (`on`, `service`,
// `import`) and their option or command lines, and each rule packaging.md sets is checked from the parse. The
// lint must pass on every variant the generator makes and fail, naming the rule, on a deliberately broken one.
import { describe, expect, it } from "vitest";
import { RC_DEFAULTS, rcProblem, rcText } from "../android/rc.mjs";

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

/** The service options init knows (system/core/init/README.md, "Options"): anything else is a typo. */
const SERVICE_OPTIONS = new Set([
  "capabilities",
  "class",
  "console",
  "critical",
  "disabled",
  "enter_namespace",
  "file",
  "group",
  "interface",
  "ioprio",
  "keycodes",
  "memcg.limit_in_bytes",
  "memcg.limit_percent",
  "memcg.limit_property",
  "memcg.soft_limit_in_bytes",
  "memcg.swappiness",
  "namespace",
  "oneshot",
  "onrestart",
  "oom_score_adjust",
  "override",
  "priority",
  "reboot_on_failure",
  "restart_period",
  "rlimit",
  "seclabel",
  "setenv",
  "shutdown",
  "sigstop",
  "socket",
  "stdio_to_kmsg",
  "task_profiles",
  "timeout_period",
  "updatable",
  "user",
  "writepid",
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
  const launched =
    command[0] === "/system/bin/sh" && command.slice(2).join(" ") === `run --state ${STATE}` && !!command[1];
  if (!direct && !launched)
    problems.push(`the service runs "${command.join(" ")}", not /system/bin/mesh-host run --state ${STATE}`);
  const options = new Map<string, string[][]>();
  for (const o of svc.body) {
    const name = o.words[0]!;
    if (!SERVICE_OPTIONS.has(name)) problems.push(`unknown service option "${name}" (line ${o.line})`);
    options.set(name, [...(options.get(name) ?? []), o.words.slice(1)]);
  }
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
    if (!options.get("setenv")?.some(([k, v]) => k === "MESH_HOST_BIN" && v === "/system/bin/mesh-host"))
      problems.push("the launcher is not told the executable: setenv MESH_HOST_BIN /system/bin/mesh-host");
    if (!options.has("seclabel")) problems.push("the launcher runs as /system/bin/sh: it needs a seclabel");
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
      "the launcher, with the seclabel it needs",
      { launcher: "/system/bin/mesh-host-launch", seclabel: "u:r:mesh_host:s0" },
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

  it("the generator refuses what would break a rule: root, a bad name, the launcher without a seclabel", () => {
    expect(() => rcText({ user: "root" })).toThrow(/must not be root/);
    expect(() => rcText({ group: "root" })).toThrow(/must not be root/);
    expect(() => rcText({ user: "no body" })).toThrow(/user or group name/);
    expect(() => rcText({ start: "never" as "class" })).toThrow(/--start/);
    expect(() => rcText({ launcher: "/system/bin/mesh-host-launch" })).toThrow(/--seclabel/);
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

  it("the launcher variant without its setenv or its seclabel", () => {
    const text = rcText({ launcher: "/system/bin/mesh-host-launch", seclabel: "u:r:mesh_host:s0" });
    expect(lintRc(text.replace(/ {4}setenv .*\n/, ""))).toEqual([
      expect.stringMatching(/^the launcher is not told the executable/),
    ]);
    expect(lintRc(text.replace(/ {4}seclabel u:r:.*\n/, ""))).toEqual([
      expect.stringMatching(/needs a seclabel/),
    ]);
  });
});
