// The bench's arithmetic and its printing: medians, percentiles, ratios, durations and markdown tables.

/** The median of `xs` (mean of the middle two for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/** The p-th percentile (0–100) by linear interpolation between closest ranks; NaN for none. */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (Math.min(100, Math.max(0, p)) / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

/** A duration for a person: "840 µs", "12.3 ms", "312 ms", "1.24 s", "465 s"; "−76 ms" (one clock ahead of another). */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  if (ms < 0) return `−${formatMs(-ms)}`;
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 100_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.round(ms / 1000)} s`;
}

/** Kilobytes (as /usr/bin/time and /proc say them) as megabytes. */
export function formatKb(kb: number | null | undefined): string {
  if (kb === null || kb === undefined || !Number.isFinite(kb)) return "—";
  return `${(kb / 1024).toFixed(kb < 10 * 1024 ? 1 : 0)} MB`;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(0)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** `a / b` as "×2.4" (slower than the baseline) or "×0.61" (faster); "—" when either is missing. */
export function formatRatio(a: number, b: number): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b <= 0) return "—";
  const r = a / b;
  return `×${r >= 10 ? r.toFixed(0) : r >= 1 ? r.toFixed(1) : r.toFixed(2)}`;
}

/** 1000 → "1,000". */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

/** A markdown table; cells are escaped for `|`. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const cell = (s: string) => s.replaceAll("|", "\\|");
  const line = (cells: readonly string[]) => `| ${cells.map(cell).join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}

/** A target's verdict: "met" or "missed by 2.3×"/"missed by 40 ms" (lower is better unless `higherIsBetter`). */
export function verdict(measured: number, target: number, higherIsBetter = false): string {
  if (!Number.isFinite(measured)) return "not measured";
  const ok = higherIsBetter ? measured >= target : measured <= target;
  if (ok) return "met";
  const factor = higherIsBetter ? target / measured : measured / target;
  return `missed (${factor.toFixed(1)}× the target)`;
}

/**
 * Marginal cost per item between consecutive sizes, and whether it stays flat (linear in N): the cost of
 * the last step may be at most `tolerance` times that of the first. Null with fewer than three sizes.
 */
export function linearity(
  points: readonly { n: number; ms: number }[],
  tolerance = 1.5,
): { perItemMs: number[]; linear: boolean } | null {
  const sorted = [...points].filter((p) => Number.isFinite(p.ms)).sort((a, b) => a.n - b.n);
  if (sorted.length < 3) return null;
  const perItemMs = sorted.slice(1).map((p, i) => (p.ms - sorted[i]!.ms) / (p.n - sorted[i]!.n));
  return { perItemMs, linear: perItemMs.at(-1)! <= tolerance * Math.max(perItemMs[0]!, 1e-9) };
}
