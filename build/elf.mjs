// Reading an ELF file's headers by hand: the glibc floor check (build/floor.mjs) and the Android build
// (android/elf.mjs) both need it, for files no installed objdump may read (another architecture).
import { readSync } from "node:fs";

/** `length` bytes of `fd` from `offset`, fewer where the file ends first. */
export function readAt(fd, offset, length) {
  const buf = Buffer.alloc(length);
  const n = readSync(fd, buf, 0, length, offset);
  return buf.subarray(0, n);
}

/** The ELF header (64 bytes read) and whether the file is 64-bit; null when it is not a little-endian ELF. */
export function elfHeader(fd) {
  const h = readAt(fd, 0, 64);
  if (h.length < 52 || h.readUInt32BE(0) !== 0x7f454c46 || h[5] !== 1) return null;
  return { h, is64: h[4] === 2 };
}
