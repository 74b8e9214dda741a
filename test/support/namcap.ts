// namcap's checks, written as functions over a built package: Debian carries no namcap (`apt-cache policy
// namcap` finds none), so the rules of Arch's package guidelines that namcap enforces are checked here, each
// problem named after the namcap rule that would have reported it. The inputs are what bsdtar and readelf say
// of the package, so a test can also feed them a package broken on purpose.
import { spawnSync } from "node:child_process";

export interface Entry {
  path: string;
  /** ls-style: `drwxr-xr-x`, `-rw-r--r--`. */
  mode: string;
  owner: string;
  group: string;
}

/** What the ELF executable says of itself (readelf): the parts namcap's elffiles and sodepends rules read. */
export interface ElfFacts {
  path: string;
  type: "EXEC" | "DYN";
  needed: string[];
  bindNow: boolean;
  relro: boolean;
  execStack: boolean;
  rpath: boolean;
}

export interface PackageFacts {
  entries: Entry[];
  /** .PKGINFO as key → every value it was given. */
  info: Record<string, string[]>;
  elves: ElfFacts[];
  /** The text of a file in the package. */
  read(path: string): string;
}

function run(argv: string[]): string {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** `bsdtar -tvf`: mode, links, owner, group, size, three date words, then the path. */
export function entriesOf(pkg: string): Entry[] {
  return run(["bsdtar", "-tvf", pkg])
    .trim()
    .split("\n")
    .map((line) => {
      const f = line.trim().split(/\s+/);
      return { mode: f[0]!, owner: f[2]!, group: f[3]!, path: f.slice(8).join(" ").replace(/\/$/, "") };
    });
}

export function parsePkginfo(text: string): Record<string, string[]> {
  const info: Record<string, string[]> = {};
  for (const line of text.split("\n")) {
    const m = /^(\w+) = (.*)$/.exec(line);
    if (m) info[m[1]!] = [...(info[m[1]!] ?? []), m[2]!];
  }
  return info;
}

/** readelf's view of one extracted ELF file. */
export function elfFactsOf(file: string, path: string): ElfFacts {
  const header = run(["readelf", "-h", file]);
  const dynamic = run(["readelf", "-d", file]);
  const segments = run(["readelf", "-lW", file]);
  const stack = /GNU_STACK.*$/m.exec(segments)?.[0] ?? "";
  return {
    path,
    type: /Type:\s+EXEC/.test(header) ? "EXEC" : "DYN",
    needed: [...dynamic.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]!),
    bindNow: /\bBIND_NOW\b|Flags:.*\bNOW\b/.test(dynamic),
    relro: /\bGNU_RELRO\b/.test(segments),
    execStack: /\bRWE\b/.test(stack),
    rpath: /\((RPATH|RUNPATH)\)/.test(dynamic),
  };
}

/** Which Arch package provides each shared library an executable may need (namcap's sodepends). */
const LIBRARY_PACKAGES: [RegExp, string][] = [
  [/^(libc|libm|libdl|libpthread|librt|ld-linux-[\w-]+)\.so(\.\d+)*$/, "glibc"],
  [/^(libstdc\+\+|libgcc_s)\.so(\.\d+)*$/, "gcc-libs"],
];

/** Top-level places a package must not put files in (namcap's hierarchy and directoryname rules). */
const FORBIDDEN = [
  "bin/",
  "sbin/",
  "lib/",
  "lib64/",
  "usr/sbin/",
  "usr/lib64/",
  "usr/local/",
  "usr/tmp/",
  "tmp/",
  "var/tmp/",
  "home/",
  "root/",
  "srv/",
  "etc/rc.d/",
  "etc/systemd/",
  "lib/systemd/",
];
const META = new Set([".PKGINFO", ".BUILDINFO", ".MTREE", ".INSTALL", ".CHANGELOG"]);

export interface Exceptions {
  /** Directories that are empty on purpose, with their mode (the state directory). */
  emptyDirs: Record<string, string>;
  /** ELF files allowed to be non-PIE, with why. */
  nonPie: Record<string, string>;
}

/** Every problem namcap would report of the package, as `rule: what` lines; none when it is clean. */
export function namcapProblems(p: PackageFacts, except: Exceptions): string[] {
  const out: string[] = [];
  const one = (key: string) => p.info[key]?.[0] ?? "";
  const name = one("pkgname");
  for (const key of ["pkgname", "pkgver", "pkgdesc", "url", "arch", "license", "size"])
    if (!one(key)) out.push(`pkginfo: no ${key}`);
  if (one("url") && !/^https:\/\/\S+$/.test(one("url")))
    out.push(`pkginfo: url "${one("url")}" is not https`);
  const desc = one("pkgdesc");
  if (desc.length > 80) out.push(`pkginfo: pkgdesc is ${desc.length} characters, more than 80`);
  if (name && desc.toLowerCase().includes(name.toLowerCase()))
    out.push("pkgnameindesc: pkgdesc names the package");
  for (const opt of p.info.optdepend ?? [])
    if (!/^[a-z0-9@._+-]+: \S.*$/.test(opt)) out.push(`pkginfo: optdepend "${opt}" gives no reason`);

  const files = p.entries.filter((e) => !META.has(e.path));
  for (const e of p.entries)
    if (e.path.startsWith(".") && !META.has(e.path)) out.push(`dotfiles: ${e.path} at the package's top`);
  for (const e of files) {
    if (e.owner !== "root" || e.group !== "root")
      out.push(`fileownership: ${e.path} is ${e.owner}:${e.group}`);
    if (e.mode[8] === "w") out.push(`permissions: ${e.path} is world-writable`);
    if (/[sS]/.test(e.mode[3]! + e.mode[6]!)) out.push(`permissions: ${e.path} is setuid or setgid`);
    const dir = e.mode.startsWith("d");
    const expected = dir
      ? (except.emptyDirs[e.path] ?? "drwxr-xr-x")
      : e.mode[3] === "x"
        ? "-rwxr-xr-x"
        : "-rw-r--r--";
    if (e.mode !== expected) out.push(`permissions: ${e.path} is ${e.mode}, not ${expected}`);
    if (!dir && e.path.startsWith("usr/bin/") && e.mode[3] !== "x")
      out.push(`permissions: ${e.path} is in usr/bin and not executable`);
    const bad = FORBIDDEN.find((f) => `${e.path}/`.startsWith(f) && !dir);
    if (bad) out.push(`hierarchy: ${e.path} is under ${bad}`);
    if (!dir && /\.(service|socket|timer|path)$/.test(e.path) && !e.path.startsWith("usr/lib/systemd/"))
      out.push(`systemdlocation: ${e.path} is not under usr/lib/systemd/`);
    if (dir && !files.some((o) => o.path.startsWith(`${e.path}/`)) && !(e.path in except.emptyDirs))
      out.push(`emptydir: ${e.path} is empty`);
  }
  const licenses = (p.info.license ?? []).filter((l) => l !== "GPL" && l !== "LGPL");
  if (
    licenses.length &&
    !files.some((e) => e.path.startsWith(`usr/share/licenses/${name}/`) && e.mode[0] === "-")
  )
    out.push(`license: ${licenses.join(", ")} needs its text in usr/share/licenses/${name}/`);

  const depends = (p.info.depend ?? []).map((d) => d.split(/[<>=]/)[0]!);
  for (const elf of p.elves) {
    if (elf.execStack) out.push(`elffiles: ${elf.path} has an executable stack`);
    if (!elf.relro || !elf.bindNow) out.push(`elffiles: ${elf.path} lacks full RELRO`);
    if (elf.rpath) out.push(`elffiles: ${elf.path} has an RPATH or RUNPATH`);
    if (elf.type === "EXEC" && !(elf.path in except.nonPie)) out.push(`elffiles: ${elf.path} lacks PIE`);
    for (const lib of elf.needed) {
      const pkg = LIBRARY_PACKAGES.find(([re]) => re.test(lib))?.[1];
      if (!pkg) out.push(`sodepends: ${elf.path} needs ${lib}, which no known package provides`);
      else if (!depends.includes(pkg))
        out.push(`sodepends: ${elf.path} needs ${lib} from ${pkg}, not in depends`);
    }
  }
  return out;
}
