// A unified diff of two texts (Myers' O(ND) shortest edit script), as `diff -u` prints it, cut at a line limit.

type Edit = { op: " " | "-" | "+"; line: string };

/** The shortest edit script from `a` to `b`, or null when it would cost more than `maxD` edits to find. */
function editScript(a: string[], b: string[], maxD: number): Edit[] | null {
  const n = a.length;
  const m = b.length;
  const offset = maxD + 1;
  const v = new Int32Array(2 * maxD + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= maxD; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x =
        k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!)
          ? v[offset + k + 1]!
          : v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b, offset, d);
    }
  }
  return null;
}

function backtrack(trace: Int32Array[], a: string[], b: string[], offset: number, dEnd: number): Edit[] {
  const edits: Edit[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = dEnd; d >= 0; d--) {
    const v = trace[d]!;
    const k = x - y;
    const prevK = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : v[offset + prevK]!;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      edits.push({ op: " ", line: a[--x]! });
      y--;
    }
    if (d === 0) break;
    if (x === prevX) edits.push({ op: "+", line: b[--y]! });
    else edits.push({ op: "-", line: a[--x]! });
  }
  while (x > 0 && y > 0) {
    edits.push({ op: " ", line: a[--x]! });
    y--;
  }
  return edits.reverse();
}

const CONTEXT = 3;

/** As GNU diff writes a range: "3" for one line at 3, "3,2" for two, "2,0" for none after line 2. */
const range = (start: number, len: number) =>
  len === 1 ? `${start + 1}` : `${len ? start + 1 : start},${len}`;

/** Hunks with three lines of context, `@@ -a,n +b,m @@` headed. */
function hunks(edits: Edit[]): string[] {
  const out: string[] = [];
  const changed = edits.map((e, i) => (e.op === " " ? -1 : i)).filter((i) => i >= 0);
  let i = 0;
  while (i < changed.length) {
    const start = Math.max(0, changed[i]! - CONTEXT);
    let end = Math.min(edits.length, changed[i]! + CONTEXT + 1);
    while (i + 1 < changed.length && changed[i + 1]! - CONTEXT <= end)
      end = Math.min(edits.length, changed[++i]! + CONTEXT + 1);
    i++;
    const before = edits.slice(0, start);
    const aStart = before.filter((e) => e.op !== "+").length;
    const bStart = before.filter((e) => e.op !== "-").length;
    const body = edits.slice(start, end);
    const aLen = body.filter((e) => e.op !== "+").length;
    const bLen = body.filter((e) => e.op !== "-").length;
    out.push(`@@ -${range(aStart, aLen)} +${range(bStart, bLen)} @@`);
    for (const e of body) out.push(`${e.op}${e.line}`);
  }
  return out;
}

const linesOf = (text: string): string[] => {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  else lines[lines.length - 1] += "\n\\ No newline at end of file";
  return lines;
};

/** `diff -u` of `before` and `after` (headers given), at most `maxLines` lines of hunks, then how many were cut. */
export function unifiedDiff(
  before: string,
  after: string,
  headers: [string, string],
  maxLines: number,
): string[] {
  const a = linesOf(before);
  const b = linesOf(after);
  // past a few hundred edits the shortest script costs more than it shows: all out, then all in, is a true diff
  const edits = editScript(a, b, Math.min(a.length + b.length, 4 * maxLines + 100)) ?? [
    ...a.map((line): Edit => ({ op: "-", line })),
    ...b.map((line): Edit => ({ op: "+", line })),
  ];
  const body = hunks(edits);
  if (!body.length) return [];
  const shown =
    body.length > maxLines
      ? [...body.slice(0, maxLines), `(${body.length - maxLines} more lines not shown)`]
      : body;
  return [`--- ${headers[0]}`, `+++ ${headers[1]}`, ...shown.flatMap((l) => l.split("\n"))];
}
