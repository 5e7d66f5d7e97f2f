// The rendered page's WCAG contrast, measured in the browser: every visible text
// node's colour against its composited background (page.evaluate(lowContrastText)).
// Self-contained: Playwright serialises the function into the page.

/** Text in the page whose WCAG contrast with its (composited) background is below 4.5:1 (3:1 for large text). */
export function lowContrastText(): { text: string; ratio: number; color: string; background: string }[] {
  type C = [number, number, number, number];
  const parse = (s: string): C | null => {
    let m = /^rgba?\(\s*([\d.]+)[\s,]+([\d.]+)[\s,]+([\d.]+)(?:\s*[,/]\s*([\d.]+))?\s*\)$/.exec(s);
    if (m) return [Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])];
    m = /^color\(srgb\s+([\d.e-]+)\s+([\d.e-]+)\s+([\d.e-]+)(?:\s*\/\s*([\d.]+))?\s*\)$/.exec(s);
    if (m) return [Number(m[1]) * 255, Number(m[2]) * 255, Number(m[3]) * 255, m[4] === undefined ? 1 : Number(m[4])];
    return null;
  };
  const over = (top: C, bottom: C): C => [0, 1, 2].map((i) => top[i]! * top[3] + bottom[i]! * (1 - top[3])).concat(1) as C;
  const lum = (c: C) => {
    const f = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const background = (el: Element): C => {
    const layers: C[] = [];
    for (let e: Element | null = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) {
        layers.push(c);
        if (c[3] >= 1) break;
      }
    }
    let bg: C = [255, 255, 255, 1];
    for (const l of layers.reverse()) bg = over(l, bg);
    return bg;
  };
  const opacity = (el: Element) => {
    let o = 1;
    for (let e: Element | null = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
    return o;
  };
  const out: { text: string; ratio: number; color: string; background: string }[] = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set<Element>();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || seen.has(el) || !(n.textContent ?? "").trim()) continue;
    seen.add(el);
    if (el.closest(".sr-only, option, :disabled, [aria-disabled=true], script, style")) continue;
    const rect = el.getBoundingClientRect();
    if (rect.width === 0 || rect.height === 0 || getComputedStyle(el).visibility === "hidden") continue;
    const o = opacity(el);
    if (o === 0) continue;
    const cs = getComputedStyle(el);
    const bg = background(el);
    const fg0 = parse(cs.color);
    if (!fg0) continue;
    const fg = over([fg0[0], fg0[1], fg0[2], fg0[3] * o], bg);
    const ratio = (Math.max(lum(fg), lum(bg)) + 0.05) / (Math.min(lum(fg), lum(bg)) + 0.05);
    const size = parseFloat(cs.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(cs.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) out.push({ text: (n.textContent ?? "").trim().slice(0, 60), ratio: Math.round(ratio * 100) / 100, color: cs.color, background: `rgb(${bg.slice(0, 3).map(Math.round).join(", ")})` });
  }
  return out;
}
