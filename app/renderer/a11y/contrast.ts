// WCAG 2 contrast: relative luminance of sRGB colours and the ratio of two,
// colour-mix in sRGB (the banners' tinted backgrounds), and the theme colours
// of the stylesheet (the custom properties of :root and of the dark theme).
// The contrast test checks every text/background pair of both themes with
// these; the e2e spec checks the rendered page's text the same way.

export interface Rgba { r: number; g: number; b: number; a: number }

/** #rgb, #rrggbb, rgb()/rgba() and Chromium's color(srgb r g b / a); null for anything else. */
export function parseColor(text: string): Rgba | null {
  const t = text.trim().toLowerCase();
  let m = /^#([0-9a-f]{3}|[0-9a-f]{6})$/.exec(t);
  if (m) {
    const h = m[1]!.length === 3 ? m[1]!.split("").map((c) => c + c).join("") : m[1]!;
    return { r: parseInt(h.slice(0, 2), 16), g: parseInt(h.slice(2, 4), 16), b: parseInt(h.slice(4, 6), 16), a: 1 };
  }
  m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)$/.exec(t);
  if (m) return { r: Number(m[1]), g: Number(m[2]), b: Number(m[3]), a: alpha(m[4]) };
  m = /^color\(srgb\s+([\d.e-]+)\s+([\d.e-]+)\s+([\d.e-]+)(?:\s*\/\s*([\d.]+%?))?\s*\)$/.exec(t);
  if (m) return { r: Number(m[1]) * 255, g: Number(m[2]) * 255, b: Number(m[3]) * 255, a: alpha(m[4]) };
  if (t === "transparent") return { r: 0, g: 0, b: 0, a: 0 };
  return null;
}

function alpha(s: string | undefined): number {
  if (s === undefined) return 1;
  return s.endsWith("%") ? Number(s.slice(0, -1)) / 100 : Number(s);
}

/** `top` painted over an opaque `bottom`. */
export function over(top: Rgba, bottom: Rgba): Rgba {
  const a = top.a;
  return { r: top.r * a + bottom.r * (1 - a), g: top.g * a + bottom.g * (1 - a), b: top.b * a + bottom.b * (1 - a), a: 1 };
}

/** color-mix(in srgb, a p, b): p of a, the rest of b (b may be transparent, then composited later). */
export function mixSrgb(a: Rgba, b: Rgba, p: number): Rgba {
  const alphaOut = a.a * p + b.a * (1 - p);
  if (alphaOut === 0) return { r: 0, g: 0, b: 0, a: 0 };
  // Premultiplied, as CSS mixes colours with alpha.
  const ch = (x: number, y: number) => (x * a.a * p + y * b.a * (1 - p)) / alphaOut;
  return { r: ch(a.r, b.r), g: ch(a.g, b.g), b: ch(a.b, b.b), a: alphaOut };
}

export function luminance(c: Rgba): number {
  const lin = (v: number) => {
    const s = v / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
}

export function contrastRatio(a: Rgba, b: Rgba): number {
  const la = luminance(a);
  const lb = luminance(b);
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
}

/** The custom properties (`--name: value;`) of one CSS block's text. */
export function customProperties(block: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of block.matchAll(/(--[\w-]+)\s*:\s*([^;]+);/g)) out[m[1]!] = m[2]!.trim();
  return out;
}

/** The text between the braces of the first block opened by `selector` in `css`, or null. */
export function blockOf(css: string, selector: string): string | null {
  const at = css.indexOf(selector);
  if (at < 0) return null;
  const open = css.indexOf("{", at);
  let depth = 0;
  for (let i = open; i < css.length; i++) {
    if (css[i] === "{") depth++;
    else if (css[i] === "}" && --depth === 0) return css.slice(open + 1, i);
  }
  return null;
}
