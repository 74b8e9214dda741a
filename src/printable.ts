// The one sanitiser for text someone else wrote (a node's report and heartbeat, a hostile declaration's key, an
// argument) before it reaches a terminal or one line of a log: a terminal obeys what it is sent, so a node that
// could print ESC could clear the operator's screen, retitle the window, colour a line or plant a hyperlink; a
// bidi override could make a line read backwards. Every such character is shown escaped (`\x1b`, `\u202e`), so
// what is seen is what was said. `--json` needs none of this: JSON escapes control characters itself.

/** C0, DEL, C1 (ESC, CSI and OSC start here), the line separators, and the bidi marks, embeddings and isolates. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escapeOf(c: string): string {
  const code = c.charCodeAt(0);
  return code < 0x100
    ? `\\x${code.toString(16).padStart(2, "0")}`
    : `\\u${code.toString(16).padStart(4, "0")}`;
}

/** `s` with every control character escaped; cut at `max` characters (whole escapes) with `…` when longer. */
export function printable(s: string, max = Number.POSITIVE_INFINITY): string {
  const safe = String(s).replace(UNSAFE, escapeOf);
  if (safe.length <= max) return safe;
  // never cut inside an escape: `\x1` would read as a different character
  const cut = safe.slice(0, max).replace(/\\(x[0-9a-f]?|u[0-9a-f]{0,3})?$/, "");
  return `${cut}…`;
}
