// What an ELF executable is, read from its headers: enough for the Android build to name the output's
// architecture and to tell an Android binary (interpreter /system/bin/linker*) from a stand-in.
import { closeSync, openSync } from "node:fs";
import { elfHeader, readAt } from "../build/elf.mjs";

/** ELF e_machine → Node's name for the architecture. */
const MACHINES = { 3: "ia32", 40: "arm", 62: "x64", 183: "arm64" };
const PT_INTERP = 3;
/** No interpreter path is longer (PATH_MAX). */
const MAX_INTERP_BYTES = 4096;

/**
 * The architecture, the ELF machine number, and the program interpreter with where its text lies in the file
 * (null for a static binary); null when the file is not a little-endian ELF. postject moves the program
 * headers of the file it injects into, so they are read from wherever the ELF header says they are.
 */
export function elfOf(file) {
  const fd = openSync(file, "r");
  try {
    const header = elfHeader(fd);
    if (!header) return null;
    const { h, is64 } = header;
    const machine = h.readUInt16LE(18);
    const phoff = is64 ? Number(h.readBigUInt64LE(0x20)) : h.readUInt32LE(0x1c);
    const phentsize = h.readUInt16LE(is64 ? 0x36 : 0x2a);
    const phnum = h.readUInt16LE(is64 ? 0x38 : 0x2c);
    const ph = readAt(fd, phoff, phentsize * phnum);
    let interpreter = null;
    for (let at = 0; at + phentsize <= ph.length; at += phentsize) {
      if (ph.readUInt32LE(at) !== PT_INTERP) continue;
      const offset = is64 ? Number(ph.readBigUInt64LE(at + 8)) : ph.readUInt32LE(at + 4);
      const size = is64 ? Number(ph.readBigUInt64LE(at + 32)) : ph.readUInt32LE(at + 16);
      const text = readAt(fd, offset, Math.min(size, MAX_INTERP_BYTES));
      interpreter = { path: text.toString("latin1").replace(/\0.*$/s, ""), offset, size };
    }
    return { arch: MACHINES[machine] ?? null, machine, interpreter };
  } finally {
    closeSync(fd);
  }
}
