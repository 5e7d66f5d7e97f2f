// Every text/background pair the stylesheet uses has a WCAG contrast of at
// least 4.5:1 in both themes, computed from the custom properties of
// styles.css itself (the light :root, the dark theme's two blocks, which must
// agree). The e2e spec checks the rendered pages the same way.
import { describe, expect, it } from "vitest";

import { blockOf, contrastRatio, customProperties, mixSrgb, over, parseColor, type Rgba } from "./contrast.js";

// Node's fs, without the renderer's type set depending on Node's types (vitest runs this file in Node).
const fs = (await import("node:" + "fs")) as { readFileSync(file: URL, encoding: "utf8"): string };
const css = fs.readFileSync(new URL("../styles.css", import.meta.url), "utf8");
const light = customProperties(blockOf(css, ":root {")!);
const darkSystem = customProperties(blockOf(blockOf(css, "@media (prefers-color-scheme: dark)")!, ':root:not([data-theme="light"])')!);
const darkChosen = customProperties(blockOf(css, ':root[data-theme="dark"]')!);

/** A background: a variable, or a variable's colour mixed into another (the banners: color-mix(in srgb, X p%, transparent) over Y). */
type Bg = string | { mix: string; percent: number; over: string };

// [text, background, where the stylesheet pairs them]
const pairs: [string, Bg, string][] = [
  ["--text", "--bg", "body"], ["--text", "--panel", "cards, rail, inputs"], ["--text", "--panel-2", "buttons, selected rows"],
  ["--text", "--user-bg", "your messages"], ["--text", "--code-bg", "code"],
  ["--muted", "--bg", "hints"], ["--muted", "--panel", "fine print, table heads, facts"], ["--muted", "--panel-2", "selected conversation's snippet"],
  ["--muted", "--user-bg", "the role line of your messages"], ["--muted", "--code-bg", "code block heads"],
  ["--accent-text", "--accent", "primary buttons"], ["--danger-text", "--danger", "danger buttons"],
  ["--accent", "--panel", "links and highlighted titles"], ["--accent", "--code-bg", "code titles"],
  ["--danger", "--panel", "errors in cards"], ["--danger", "--bg", "form errors"], ["--danger", "--panel-2", "errors on buttons' grey"],
  ["--ok", "--panel", "ok badges"], ["--ok", "--bg", "ok notes"],
  ["--warn", "--panel", "queue notes, warn badges"], ["--warn", "--bg", "warnings"],
  ["--tok-keyword", "--code-bg", "code"], ["--tok-string", "--code-bg", "code"], ["--tok-number", "--code-bg", "code"], ["--tok-comment", "--code-bg", "code"],
  ["--danger", { mix: "--danger", percent: 14, over: "--bg" }, "error banners"],
  ["--danger", { mix: "--danger", percent: 14, over: "--panel" }, "error banners in cards"],
  ["--text", { mix: "--warn", percent: 14, over: "--panel" }, "notices"],
  ["--warn", { mix: "--warn", percent: 14, over: "--bg" }, "warning banners"],
  ["--text", { mix: "--accent", percent: 10, over: "--bg" }, "notes"],
  ["--text", { mix: "--accent", percent: 10, over: "--panel" }, "notes in cards"],
];

function color(vars: Record<string, string>, name: string): Rgba {
  const c = parseColor(vars[name] ?? "");
  if (!c) throw new Error(`${name} is not a colour: ${vars[name]}`);
  return c;
}

function background(vars: Record<string, string>, bg: Bg): Rgba {
  if (typeof bg === "string") return color(vars, bg);
  return over(mixSrgb(color(vars, bg.mix), { r: 0, g: 0, b: 0, a: 0 }, bg.percent / 100), color(vars, bg.over));
}

describe("theme contrast", () => {
  it("defines the dark theme once in substance: the system's and the chosen dark blocks agree", () => {
    expect(Object.keys(darkSystem).length).toBeGreaterThan(15);
    expect(darkChosen).toEqual(darkSystem);
    expect(Object.keys(darkSystem).sort()).toEqual(Object.keys(light).sort());
  });

  for (const [name, vars] of [["light", light], ["dark", darkSystem]] as const) {
    it(`gives every text/background pair of the ${name} theme at least 4.5:1`, () => {
      const failing = pairs
        .map(([fg, bg, where]) => ({ fg, bg: typeof bg === "string" ? bg : `${bg.mix} ${bg.percent}% over ${bg.over}`, where, ratio: contrastRatio(color(vars, fg), background(vars, bg)) }))
        .filter((p) => p.ratio < 4.5)
        .map((p) => `${p.fg} on ${p.bg} (${p.where}): ${p.ratio.toFixed(2)}`);
      expect(failing).toEqual([]);
    });
  }

  it("computes WCAG contrast as the standard does", () => {
    expect(contrastRatio(parseColor("#000")!, parseColor("#fff")!)).toBeCloseTo(21, 5);
    expect(contrastRatio(parseColor("#777777")!, parseColor("#ffffff")!)).toBeCloseTo(4.48, 2);
    expect(parseColor("color(srgb 1 0 0 / 0.14)")).toEqual({ r: 255, g: 0, b: 0, a: 0.14 });
    expect(parseColor("rgba(10, 20, 30, 0.5)")).toEqual({ r: 10, g: 20, b: 30, a: 0.5 });
    expect(over({ r: 255, g: 255, b: 255, a: 0.5 }, { r: 0, g: 0, b: 0, a: 1 })).toEqual({ r: 127.5, g: 127.5, b: 127.5, a: 1 });
  });
});
