// A tiny SVG writer for the bench's log–log plots: panels side by side, one line per series, one legend.
// No dependency and no browser: the output is a plain string a viewer (or rsvg-convert) renders.

export interface Point {
  x: number;
  y: number;
}

export interface Series {
  name: string;
  points: Point[];
}

export interface Panel {
  title: string;
  series: Series[];
}

export interface FigureOptions {
  title: string;
  subtitle?: string;
  xLabel: string;
  yLabel: string;
  panels: Panel[];
  formatX?: (x: number) => string;
  formatY?: (y: number) => string;
  panelWidth?: number;
  panelHeight?: number;
}

/** Colours that stay apart for the usual number of tools (Okabe–Ito, colour-blind safe). */
export const PALETTE = [
  "#0072B2",
  "#D55E00",
  "#009E73",
  "#CC79A7",
  "#E69F00",
  "#56B4E9",
  "#000000",
  "#F0E442",
];
const DASHES = ["", "6 3", "2 3", "8 3 2 3"];

export function escapeXml(s: string): string {
  return s
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&apos;");
}

/** The decades spanning [min, max]: [10^floor(log min) … 10^ceil(log max)]. */
export function decadeRange(min: number, max: number): [number, number] {
  const lo = 10 ** Math.floor(Math.log10(min));
  let hi = 10 ** Math.ceil(Math.log10(max));
  if (hi <= lo) hi = lo * 10;
  return [lo, hi];
}

/** Tick values on a log axis: every decade, and 2× and 5× when the axis spans few decades. */
export function logTicks(lo: number, hi: number): number[] {
  const decades = Math.round(Math.log10(hi / lo));
  const steps = decades <= 2 ? [1, 2, 5] : [1];
  const ticks: number[] = [];
  for (let d = Math.round(Math.log10(lo)); d <= Math.round(Math.log10(hi)); d++)
    for (const s of steps) {
      const v = s * 10 ** d;
      if (v >= lo * 0.999 && v <= hi * 1.001) ticks.push(v);
    }
  return ticks;
}

const isDecade = (v: number) => Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9;

const num = (v: number) => (Math.round(v * 10) / 10).toString();

/** A log scale mapping [lo, hi] onto [a, b] (pixels). */
export function logScale(lo: number, hi: number, a: number, b: number): (v: number) => number {
  const l = Math.log10(lo);
  const span = Math.log10(hi) - l;
  return (v) => a + ((Math.log10(v) - l) / span) * (b - a);
}

function text(x: number, y: number, s: string, attrs = ""): string {
  return `<text x="${num(x)}" y="${num(y)}" ${attrs}>${escapeXml(s)}</text>`;
}

/** The whole figure: a title, panels sharing both axes' ranges, and a legend naming each series once. */
export function figure(o: FigureOptions): string {
  const W = o.panelWidth ?? 330;
  const H = o.panelHeight ?? 280;
  const fx = o.formatX ?? String;
  const fy = o.formatY ?? String;
  const all = o.panels.flatMap((p) => p.series.flatMap((s) => s.points)).filter((p) => p.x > 0 && p.y > 0);
  const names = [...new Set(o.panels.flatMap((p) => p.series.map((s) => s.name)))];
  const style = new Map(
    names.map((n, i) => [
      n,
      { color: PALETTE[i % PALETTE.length]!, dash: DASHES[Math.floor(i / PALETTE.length) % 4]! },
    ]),
  );
  const [xlo, xhi] = all.length
    ? decadeRange(Math.min(...all.map((p) => p.x)), Math.max(...all.map((p) => p.x)))
    : [1, 10];
  const [ylo, yhi] = all.length
    ? decadeRange(Math.min(...all.map((p) => p.y)), Math.max(...all.map((p) => p.y)))
    : [1, 10];
  const margin = { left: 88, right: 16, top: 70, bottom: 56 };
  const legendW = 250;
  const width = margin.left + o.panels.length * (W + margin.right + 24) + legendW;
  const height = margin.top + H + margin.bottom + 10;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    text(margin.left, 24, o.title, 'font-size="16" font-weight="bold"'),
  ];
  if (o.subtitle) parts.push(text(margin.left, 44, o.subtitle, 'fill="#555555"'));
  o.panels.forEach((panel, i) => {
    const x0 = margin.left + i * (W + margin.right + 24);
    const y0 = margin.top;
    const sx = logScale(xlo * 0.7, xhi * 1.4, x0, x0 + W);
    const sy = logScale(ylo, yhi, y0 + H, y0);
    parts.push(
      `<g class="panel">`,
      text(x0 + W / 2, y0 - 10, panel.title, 'text-anchor="middle" font-weight="bold"'),
    );
    parts.push(`<rect x="${x0}" y="${y0}" width="${W}" height="${H}" fill="none" stroke="#333333"/>`);
    for (const t of logTicks(ylo, yhi)) {
      const y = sy(t);
      parts.push(`<line x1="${x0}" y1="${num(y)}" x2="${x0 + W}" y2="${num(y)}" stroke="#e5e5e5"/>`);
      if (i === 0) parts.push(text(x0 - 6, y + 4, fy(t), 'text-anchor="end"'));
    }
    for (const t of logTicks(xlo, xhi)) {
      const x = sx(t);
      parts.push(`<line x1="${num(x)}" y1="${y0}" x2="${num(x)}" y2="${y0 + H}" stroke="#e5e5e5"/>`);
      // labelled: the decades and the sizes measured; 2× and 5× only get a grid line
      if (isDecade(t) || all.some((p) => p.x === t))
        parts.push(text(x, y0 + H + 16, fx(t), 'text-anchor="middle"'));
    }
    parts.push(text(x0 + W / 2, y0 + H + 38, o.xLabel, 'text-anchor="middle"'));
    for (const s of panel.series) {
      const pts = s.points.filter((p) => p.x > 0 && p.y > 0).sort((a, b) => a.x - b.x);
      if (!pts.length) continue;
      const { color, dash } = style.get(s.name)!;
      const d = pts.map((p, k) => `${k ? "L" : "M"}${num(sx(p.x))} ${num(sy(p.y))}`).join(" ");
      const dashAttr = dash ? ` stroke-dasharray="${dash}"` : "";
      parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"${dashAttr}/>`);
      for (const p of pts)
        parts.push(
          `<circle cx="${num(sx(p.x))}" cy="${num(sy(p.y))}" r="3.5" fill="${color}"><title>${escapeXml(`${s.name}: ${fx(p.x)} → ${fy(p.y)}`)}</title></circle>`,
        );
    }
    parts.push(`</g>`);
  });
  const yMid = margin.top + H / 2;
  parts.push(text(18, yMid, o.yLabel, `text-anchor="middle" transform="rotate(-90 18 ${num(yMid)})"`));
  const lx = width - legendW + 10;
  parts.push(`<g class="legend">`, text(lx, margin.top - 10, "tool", 'font-weight="bold"'));
  names.forEach((n, k) => {
    const { color, dash } = style.get(n)!;
    const y = margin.top + 8 + k * 20;
    const dashAttr = dash ? ` stroke-dasharray="${dash}"` : "";
    parts.push(
      `<line x1="${lx}" y1="${y}" x2="${lx + 26}" y2="${y}" stroke="${color}" stroke-width="2"${dashAttr}/>`,
    );
    parts.push(`<circle cx="${lx + 13}" cy="${y}" r="3.5" fill="${color}"/>`, text(lx + 34, y + 4, n));
  });
  parts.push(`</g>`, `</svg>`);
  return `${parts.join("\n")}\n`;
}
