// The SELinux fragment android/build.mjs writes beside mesh-host.rc, read against the grammar of AOSP's policy
// sources: mesh_host.te in the te language with system/sepolicy's macros (statements end in `;`, macros are
// calls, `allow source target:class perms;`, perms one name or a `{ … }` set), file_contexts as `regex context`
// lines with `u:object_r:<type>:s0` contexts. Each name must be declared by the fragment or be AOSP's; the
// transition from init must be there; every path the rc file makes init start or create must be labelled.
import { describe, expect, it } from "vitest";
import { dataBinary, RC_DEFAULTS, type RcOptions } from "../../android/rc.mjs";
import { fileContextsText, teText } from "../../android/sepolicy.mjs";

/** Names system/sepolicy (public and private) defines that the fragment may use. */
const AOSP_TYPES = new Set(["init", "shell_exec", "toolbox_exec", "self"]);
const AOSP_ATTRIBUTES = new Set([
  "domain",
  "coredomain",
  "file_type",
  "exec_type",
  "system_file_type",
  "data_file_type",
  "core_data_file_type",
]);
/** te_macros and global_macros the fragment may call, with their arity. */
const MACROS = new Map([
  ["init_daemon_domain", 1],
  ["net_domain", 1],
]);
const PERM_MACROS = new Set(["create_dir_perms", "create_file_perms", "rx_file_perms", "r_file_perms"]);
/** Security classes and the permissions of them the fragment may name (system/sepolicy/private/access_vectors). */
const CLASS_PERMS: Record<string, Set<string>> = {
  file: new Set([
    "read",
    "open",
    "getattr",
    "map",
    "execute",
    "execute_no_trans",
    "write",
    "create",
    "unlink",
  ]),
  dir: new Set(["search", "read", "open", "getattr", "write", "add_name", "remove_name", "create", "rmdir"]),
  process: new Set(["execmem", "transition", "sigchld"]),
};
const NAME = /^[a-z_][a-z0-9_]*$/;

interface Te {
  types: Map<string, string[]>;
  calls: [string, string[]][];
  allows: { source: string; target: string; cls: string; perms: string[] }[];
}

/** mesh_host.te as problems found, and what it declares. */
function lintTe(text: string): { problems: string[]; te: Te } {
  const problems: string[] = [];
  const te: Te = { types: new Map(), calls: [], allows: [] };
  const body = text
    .split("\n")
    .map((l) => l.replace(/#.*$/, ""))
    .join("\n");
  // macro calls stand alone; every other statement ends in `;`
  const rest = body.replace(/\b([a-z_]+)\(([^)]*)\)/g, (_m, name: string, args: string) => {
    te.calls.push([name, args.split(",").map((a) => a.trim())]);
    return "";
  });
  const statements = rest.split(";").map((s) => s.trim());
  if (statements.at(-1)) problems.push(`a statement without its ";": "${statements.at(-1)}"`);
  for (const st of statements.slice(0, -1)) {
    const words = st.split(/\s+/);
    if (words[0] === "type") {
      const [name, ...attrs] = st
        .slice(5)
        .split(",")
        .map((w) => w.trim());
      if (!name || !NAME.test(name)) problems.push(`type "${name}" is not a name`);
      else te.types.set(name, attrs);
      for (const a of attrs) if (!AOSP_ATTRIBUTES.has(a)) problems.push(`unknown attribute ${a} on ${name}`);
      continue;
    }
    const allow = /^allow\s+(\S+)\s+(\S+):(\S+)\s+(\{[^}]*\}|\S+)$/.exec(st);
    if (!allow) {
      problems.push(`not a te statement: "${st}"`);
      continue;
    }
    const [, source, target, cls, permText] = allow as unknown as string[];
    const perms = permText!.replace(/[{}]/g, " ").trim().split(/\s+/);
    te.allows.push({ source: source!, target: target!, cls: cls!, perms });
  }
  const known = (t: string) => te.types.has(t) || AOSP_TYPES.has(t);
  for (const [name, args] of te.calls) {
    const arity = MACROS.get(name);
    if (arity === undefined) problems.push(`unknown macro ${name}()`);
    else if (args.length !== arity) problems.push(`${name}() takes ${arity} arguments, not ${args.length}`);
    for (const a of args) if (!known(a)) problems.push(`${name}(${a}): ${a} is not declared`);
    // init_daemon_domain(d) is domain_auto_trans(init, d_exec, d): the executable's type must exist
    if (name === "init_daemon_domain" && !te.types.has(`${args[0]}_exec`))
      problems.push(`init_daemon_domain(${args[0]}) needs type ${args[0]}_exec`);
  }
  if (!te.calls.some(([name, args]) => name === "init_daemon_domain" && args[0] === "mesh_host"))
    problems.push("no transition from init to mesh_host: init refuses to start the service");
  for (const a of te.allows) {
    for (const t of [a.source, a.target])
      if (!known(t)) problems.push(`allow names ${t}, which is not declared`);
    const valid = CLASS_PERMS[a.cls];
    if (!valid) problems.push(`unknown class ${a.cls}`);
    else
      for (const p of a.perms)
        if (!valid.has(p) && !PERM_MACROS.has(p)) problems.push(`${a.cls} has no permission ${p}`);
  }
  return { problems, te };
}

/** file_contexts as problems found, and its entries. */
function lintFileContexts(text: string, te: Te) {
  const problems: string[] = [];
  const entries: { re: RegExp; type: string }[] = [];
  for (const line of text.split("\n").filter((l) => l.trim() && !l.startsWith("#"))) {
    const [regex, context, extra] = line.trim().split(/\s+/);
    if (extra !== undefined)
      problems.push(`"${line}": a file type filter is not used here, or too many fields`);
    const m = /^u:object_r:([a-z_][a-z0-9_]*):s0$/.exec(context ?? "");
    if (!m) {
      problems.push(`"${context}" is not a u:object_r:<type>:s0 context`);
      continue;
    }
    if (!te.types.get(m[1]!)?.includes("file_type"))
      problems.push(`${m[1]} is not a file_type declared in the .te`);
    try {
      entries.push({ re: new RegExp(`^(?:${regex})$`), type: m[1]! });
    } catch {
      problems.push(`"${regex}" is not a regular expression`);
    }
  }
  // the last match wins, as in the real file_contexts
  const labelOf = (path: string) => entries.filter((e) => e.re.test(path)).at(-1)?.type ?? null;
  return { problems, labelOf };
}

const LAUNCHER = "/system/bin/mesh-host-launch";
const variants: [string, Partial<RcOptions>][] = [
  ["the executable in /system", {}],
  ["the launcher and the executable under /data", { launcher: LAUNCHER }],
];

describe("the SELinux fragment beside mesh-host.rc", () => {
  it.each(variants)("passes the grammar and labels every path of the rc file: %s", (_what, options) => {
    const o = { ...RC_DEFAULTS, ...options };
    const { problems, te } = lintTe(teText(o));
    expect(problems).toEqual([]);
    const fc = lintFileContexts(fileContextsText(o), te);
    expect(fc.problems).toEqual([]);
    expect(te.calls).toContainEqual(["init_daemon_domain", ["mesh_host"]]);
    expect(te.calls).toContainEqual(["net_domain", ["mesh_host"]]);
    // what init starts transitions to the domain; what init makes and the host writes is its data
    expect(fc.labelOf(o.launcher ?? o.binary)).toBe("mesh_host_exec");
    expect(fc.labelOf(o.state)).toBe("mesh_host_data_file");
    expect(fc.labelOf(`${o.state}/launcher/state`)).toBe("mesh_host_data_file");
    expect(fc.labelOf("/data/mesh-hostile")).toBeNull();
    const execsData = te.allows.some(
      (a) => a.target === "mesh_host_data_file" && a.cls === "file" && a.perms.includes("execute_no_trans"),
    );
    if (o.launcher) {
      expect(fc.labelOf(dataBinary(o.state))).toBe("mesh_host_data_file");
      expect(fc.labelOf(o.binary)).toBeNull();
      expect(execsData).toBe(true);
      expect(te.allows.some((a) => a.target === "shell_exec")).toBe(true);
    } else expect(execsData).toBe(false);
  });

  it("the grammar check fails a fragment broken on purpose, naming what is wrong", () => {
    const o = { ...RC_DEFAULTS, launcher: LAUNCHER };
    const te = teText(o);
    const broken: [string, string, RegExp][] = [
      ["no transition", te.replace("init_daemon_domain(mesh_host)\n", ""), /no transition/],
      [
        "an undeclared type",
        te.replace("allow mesh_host self", "allow mesh_host meshhost"),
        /meshhost, which is not declared/,
      ],
      ["a lost semicolon", te.replace("create_dir_perms;", "create_dir_perms"), /not a te statement/],
      [
        "an unknown class",
        te.replace(":dir create_dir_perms", ":directory create_dir_perms"),
        /unknown class directory/,
      ],
      ["an unknown permission", te.replace("execmem", "exec_mem"), /process has no permission exec_mem/],
      [
        "an unknown macro",
        te.replace("net_domain(mesh_host)", "network_domain(mesh_host)"),
        /unknown macro network_domain/,
      ],
      [
        "an exec type missing",
        te.replace("type mesh_host_exec, system_file_type, exec_type, file_type;\n", ""),
        /needs type mesh_host_exec/,
      ],
    ];
    for (const [what, text, rule] of broken) {
      expect(lintTe(text).problems.join("; "), what).toMatch(rule);
    }
    const parsed = lintTe(te).te;
    const fc = fileContextsText(o);
    expect(
      lintFileContexts(fc.replace("u:object_r:mesh_host_exec:s0", "mesh_host_exec"), parsed).problems.join(),
    ).toMatch(/is not a u:object_r/);
    expect(
      lintFileContexts(fc.replace("mesh_host_data_file:s0", "mesh_data:s0"), parsed).problems.join(),
    ).toMatch(/mesh_data is not a file_type/);
    expect(
      lintFileContexts(`${fc}/data/x(    u:object_r:mesh_host_data_file:s0\n`, parsed).problems.join(),
    ).toMatch(/not a regular expression/);
  });
});
