// The one sanitiser (src/printable.ts): every control character a terminal obeys is shown escaped,
// what is printable passes unchanged, escaping twice changes nothing, and a cut never splits an escape.
import { describe, expect, it } from "vitest";
import { table } from "../../src/cli/output.ts";
import { printable } from "../../src/printable.ts";

describe("printable", () => {
  it("escapes C0, DEL, C1, the line separators and the bidi controls; leaves the rest", () => {
    expect(printable("a\x1b[2Jb")).toBe("a\\x1b[2Jb");
    expect(printable("\x00\x07\x09\x0a\x0d\x7f")).toBe("\\x00\\x07\\x09\\x0a\\x0d\\x7f");
    expect(printable("\u0085\u009b\u009d")).toBe("\\x85\\x9b\\x9d");
    expect(printable("\u2028\u2029")).toBe("\\u2028\\u2029");
    expect(printable("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")).toBe(
      "\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c",
    );
    expect(printable("café ✓ 日本 /srv/site")).toBe("café ✓ 日本 /srv/site");
  });

  it("is idempotent, and cuts whole escapes", () => {
    const once = printable("\x1b]8;;https://x/\x1b\\a\x1b]8;;\x1b\\");
    expect(printable(once)).toBe(once);
    expect(printable("ab\x1bcd", 4)).toBe("ab…");
    expect(printable("abcdef", 3)).toBe("abc…");
  });

  it("a report's table shows every cell escaped", () => {
    const out = table([{ id: "x\x1b[31m", type: "file", did: "created", detail: "\x1b]0;t\x07" }]);
    expect(out).toBe("  created  file  x\\x1b[31m  \\x1b]0;t\\x07\n");
  });
});
