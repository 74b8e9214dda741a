import { MAX_BODY_BYTES, MAX_JSON_DEPTH } from "../defaults.ts";
import { printable } from "../printable.ts";

export type JsonResult = { ok: true; value: unknown } | { ok: false; reason: string };

/** A size as a person reads it: "16 MiB", "19.1 MiB", "512 KiB", "900 bytes"; a limit in raw bytes said little. */
export function sizeWords(bytes: number): string {
  const units: [number, string][] = [
    [1024 ** 3, "GiB"],
    [1024 ** 2, "MiB"],
    [1024, "KiB"],
  ];
  for (const [size, unit] of units)
    if (bytes >= size) {
      const n = Math.round((bytes / size) * 10) / 10;
      return `${n} ${unit}`;
    }
  return `${bytes} bytes`;
}

/** "20 MiB, more than the 16 MiB allowed"; in bytes where the two would read the same once rounded. */
export function tooBig(size: number, max: number): string {
  const [a, b] = [sizeWords(size), sizeWords(max)];
  return a === b ? `${size} bytes, more than the ${max} bytes allowed` : `${a}, more than the ${b} allowed`;
}

/**
 * Bytes to JSON, refusing by size before decoding, by encoding (UTF-8 only), and by depth before
 * JSON.parse, so a hostile body can neither exhaust memory nor overflow the stack.
 */
export function parseJsonBytes(bytes: Uint8Array | string, maxBytes = MAX_BODY_BYTES): JsonResult {
  const size = typeof bytes === "string" ? Buffer.byteLength(bytes) : bytes.byteLength;
  if (size > maxBytes) return { ok: false, reason: `is ${tooBig(size, maxBytes)}` };
  let text: string;
  if (typeof bytes === "string") text = bytes;
  else {
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      return { ok: false, reason: "is not valid UTF-8" };
    }
  }
  const depth = maxDepth(text);
  if (depth > MAX_JSON_DEPTH) return { ok: false, reason: `nests deeper than ${MAX_JSON_DEPTH} levels` };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    // V8 quotes the text it choked on: the attacker's bytes, escaped before they reach a line
    return {
      ok: false,
      reason: `is not JSON (${printable((e as Error).message.split("\n")[0] ?? "", 200)})`,
    };
  }
}

/** Bracket depth outside strings: a linear scan that jumps over each string, cheaper than JSON.parse itself. */
function maxDepth(text: string): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // a declaration is mostly strings (content, paths): found by indexOf, not walked a character at a time,
    // which made this scan cost more than the parse (issue 22)
    if (c === 34) i = closingQuote(text, i);
    else if (c === 123 || c === 91) {
      depth++;
      if (depth > max) max = depth;
      if (max > MAX_JSON_DEPTH) return max;
    } else if (c === 125 || c === 93) depth--;
  }
  return max;
}

/** Where the string opened at `open` closes: the next quote after an even run of backslashes; else the end. */
function closingQuote(text: string, open: number): number {
  for (let at = text.indexOf('"', open + 1); at !== -1; at = text.indexOf('"', at + 1)) {
    let slashes = 0;
    while (text.charCodeAt(at - 1 - slashes) === 92) slashes++;
    if (slashes % 2 === 0) return at;
  }
  return text.length;
}
