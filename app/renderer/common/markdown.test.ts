// The chat's markdown rendering, as static HTML: GitHub-flavoured markdown,
// math and code render; untrusted markup (scripts, event handlers,
// javascript: links, remote images, KaTeX's \href) does not.
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";

import { Markdown } from "./Markdown.js";
import { safeUrl } from "./markdown-rules.js";
import { splitReasoning } from "./reasoning.js";

const html = (text: string) => renderToStaticMarkup(createElement(Markdown, { text }));

describe("Markdown", () => {
  it("renders GFM tables, task lists, nested lists, strikethrough and autolinks", () => {
    const out = html("| a | b |\n|---|:-:|\n| 1 | **2** |\n\n- [x] done\n- [ ] todo\n  1. inner\n  2. more\n\n~~gone~~ https://example.org");
    expect(out).toMatch(/<table><thead><tr><th>a<\/th><th style="text-align:center">b<\/th><\/tr><\/thead><tbody><tr><td>1<\/td><td style="text-align:center"><strong>2<\/strong><\/td><\/tr><\/tbody><\/table>/);
    expect(out).toMatch(/<input type="checkbox" disabled="" checked=""\/> done/);
    expect(out).toMatch(/<input type="checkbox" disabled=""\/> todo/);
    expect(out).toMatch(/<li[^>]*>.*todo\s*<ol>\s*<li>inner<\/li>/s);
    expect(out).toContain("<del>gone</del>");
    expect(out).toContain('<a href="https://example.org" target="_blank" rel="noopener noreferrer">https://example.org</a>');
  });

  it("hands math to KaTeX, inline and display (the page typesets it: e2e/chat.e2e.test.ts)", () => {
    const out = html("Euler: $e^{i\\pi} + 1 = 0$\n\n$$\n\\int_0^1 x^2\\,dx = \\frac{1}{3}\n$$");
    expect(out).toContain('<span class="math math-inline" data-tex="e^{i\\pi} + 1 = 0"></span>');
    expect(out).toContain('<div class="math-block"><span class="math math-display" data-tex="\\int_0^1 x^2\\,dx = \\frac{1}{3}"></span></div>');
    expect(out).not.toContain("<pre");
  });

  it("highlights fenced code and gives it a copy button", () => {
    const out = html("```ts\nconst a = \"x\"; // note\n```");
    expect(out).toContain('<span class="hljs-keyword">const</span>');
    expect(out).toContain('<span class="hljs-string">&quot;x&quot;</span>');
    expect(out).toContain('<span class="hljs-comment">// note</span>');
    expect(out).toContain('aria-label="Copy code"');
    expect(out).toMatch(/<span>ts<\/span>/);
  });

  it("shows raw HTML as text and never emits scripts, handlers, javascript: links or remote images", () => {
    const evil = [
      "<script>alert(1)</script>",
      "<img src=x onerror=alert(2)>",
      "Click [here](javascript:alert(3)) or [there](JaVa\tScRiPt:alert(4)) or <a href=\"javascript:alert(5)\">raw</a>.",
      "![tracker](https://evil.example/pixel.png) ![data](data:image/png;base64,AAAA)",
      "[rel](/app/rpc/chat/deleteConversation) [ok](https://example.org/a?b=1#c)",
      "$\\href{javascript:alert(6)}{x}$ $\\htmlClass{evil}{y}$",
      "<details open ontoggle=alert(7)>x</details>",
    ].join("\n\n");
    const out = html(evil);
    // (the text of the refused markup is shown escaped: only real tags and attributes count)
    expect(out).not.toMatch(/<script|<img|<iframe|<details|\son\w+="|href="javascript|href="data:|href="\/app/i);
    expect(out).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(out).toContain("&lt;img src=x onerror=alert(2)&gt;");
    expect(out).toContain('<span class="md-link-refused"');
    expect(out).toContain('<a class="md-image" href="https://evil.example/pixel.png" target="_blank" rel="noopener noreferrer">[image: tracker]</a>');
    expect(out).toContain('<span class="md-image">[image: data]</span>');
    expect(out).toContain('<a href="https://example.org/a?b=1#c"');
    expect(out).not.toContain("alert(6)</a>");
  });
});

describe("safeUrl", () => {
  it("keeps http(s), mailto and anchors only", () => {
    expect(["https://a.org/x", "HTTP://a.org", "mailto:me@a.org", "#fn-1"].map(safeUrl)).toEqual(["https://a.org/x", "HTTP://a.org", "mailto:me@a.org", "#fn-1"]);
    expect(["javascript:alert(1)", " java\nscript:x", "data:text/html,x", "vbscript:x", "file:///etc/passwd", "/app/rpc", "x.html", "//evil.org"].map(safeUrl))
      .toEqual(["", "", "", "", "", "", "", ""]);
  });
});

describe("splitReasoning", () => {
  it("takes a leading <think> block apart from the answer, also while it is still open", () => {
    expect(splitReasoning("<think>\nfirst A, then B\n</think>\n\nThe answer.")).toEqual({ reasoning: "first A, then B", thinking: false, answer: "The answer." });
    expect(splitReasoning("  <think>still going")).toEqual({ reasoning: "still going", thinking: true, answer: "" });
    // The template opened the block: only its end is in the text.
    expect(splitReasoning("weighing it</think>Yes.")).toEqual({ reasoning: "weighing it", thinking: false, answer: "Yes." });
    expect(splitReasoning("No reasoning <think> here")).toEqual({ reasoning: null, thinking: false, answer: "No reasoning <think> here" });
  });
});
