// A streaming reply's markdown, block by block (markdown-blocks.ts, StreamingMarkdown):
// a synthetic 4,000-token reply full of the blocks that span blank lines (code
// fences, math blocks, loose and nested lists, tables, block quotes, HTML comments,
// indented code) streams one token at a time. At every step the incremental split
// agrees with a split of the whole text, what the page shows equals the one-piece
// render of the same text, and the work per token stays bounded by the open block:
// the one-piece render on every token (the old way) is quadratic in the reply.
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";

import { MarkdownBlocks, settledCuts, splitMarkdown } from "./markdown-blocks.js";
import { Markdown, StreamingMarkdown } from "./Markdown.js";

const whole = (text: string) => renderToStaticMarkup(createElement(Markdown, { text }));
const streamed = (text: string) => renderToStaticMarkup(createElement(StreamingMarkdown, { text }));

/** One section of a long reply; `n` varies it. Every construct here can be cut mid-way by a token boundary. */
function section(n: number): string {
  return [
    `## Part ${n}: what changes`, "",
    `The function \`step${n}\` takes *x* and returns **x + ${n}**, see https://example.org/${n} and $a_${n}^2 + b^2 = c^2$.`,
    "A second line of the same paragraph, with ~~old~~ text.", "",
    "1. first item", "2. second item", "", "3. third item, after a blank line (the list is loose)", "",
    "   continued inside the third item", "",
    "- outer", "  - inner one", "  - inner two", "", "    still the inner item's text", "- [x] done", "- [ ] todo", "",
    "```ts", `function step${n}(x: number): number {`, "", "  // a blank line above, inside the fence", `  return x + ${n};`, "}", "", "```", "",
    "~~~", "tilde fence with ``` inside", "", "~~~", "",
    "$$", `\\sum_{i=0}^{${n}} i = \\frac{${n}(${n}+1)}{2}`, "", "\\int_0^1 x\\,dx", "$$", "",
    "| name | value |", "|:-----|------:|", `| a${n} | ${n} |`, "| b | `c|d` |", "",
    "> A quote", "> over two lines", ">", "> and a second paragraph", "",
    "> a new quote after a blank line", "",
    "<!-- a comment", "", "over a blank line -->", "",
    "    indented code", "", "    more of it", "",
    "Setext heading", "--------------", "",
    "***", "",
    "<script>alert(1)</script> shown as text", "",
  ].join("\n");
}

/** Splits text into "tokens" of 1 to 6 characters (a fixed pseudo-random sequence). */
function tokens(text: string): string[] {
  const out: string[] = [];
  let seed = 12345;
  for (let i = 0; i < text.length;) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    const n = 1 + (seed % 6);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

const reply = Array.from({ length: 16 }, (_, i) => section(i + 1)).join("\n");
const stream = tokens(reply);

describe("markdown-blocks: the split", () => {
  it("is a long reply: about 4,000 tokens", () => {
    expect(stream.length).toBeGreaterThan(3800);
    expect(stream.join("")).toBe(reply);
  });

  it("settles nothing inside a fence, a math block, a list, a quote or an HTML block, nor on a line still being written", () => {
    expect(settledCuts("```\na\n\nb\n\nc")).toEqual([]);
    expect(settledCuts("$$\na\n\nb\n\nc")).toEqual([]);
    expect(settledCuts("<!--\n\nb\n\nc")).toEqual([]);
    expect(settledCuts("- a\n\n- b\n\n  c\n")).toEqual([]);
    // "2" may yet become "2. b", continuing the list: nothing settles until its line is complete.
    expect(settledCuts("1. a\n\n2")).toEqual([]);
    expect(settledCuts("1. a\n\n2. b\n")).toEqual([]);
    expect(settledCuts("1. a\n\n2\n")).toEqual([6]);
    // No blank line between: a block that may still take the next line (a table's rows, a setext underline) waits.
    expect(settledCuts("para\n| a |\n")).toEqual([]);
    expect(settledCuts("# Title\n\npara\n\n```\ncode\n```\n\nnext\n")).toEqual([9, 15, 29]);
  });

  it("grows incrementally exactly as a split of the whole text at every token, and joins back to the text", () => {
    const blocks = new MarkdownBlocks();
    let text = "";
    stream.forEach((t, i) => {
      text += t;
      const split = blocks.update(text);
      expect(split.settled.join("") + split.open).toBe(text);
      // A whole-text split at every 29th token (and the last) keeps this test quick; the incremental one runs at every token.
      if (i % 29 === 0 || i === stream.length - 1) expect(split, `token ${i}`).toEqual(splitMarkdown(text));
    });
    expect(blocks.update(reply).settled.length).toBeGreaterThan(16 * 12);
  });

  it("starts over on a text that does not continue the settled one", () => {
    const blocks = new MarkdownBlocks();
    blocks.update("a\n\nb\n\nc");
    expect(blocks.update("x\n\ny\n")).toEqual({ settled: ["x\n\n"], open: "y\n" });
  });
});

describe("StreamingMarkdown", () => {
  it("renders what Markdown renders of the same text at every token of a section, and once complete", () => {
    const one = tokens(section(7));
    let text = "";
    one.forEach((t, i) => {
      text += t;
      expect(streamed(text), `token ${i}: ${JSON.stringify(text.slice(-40))}`).toBe(whole(text));
    });
    expect(one.length).toBeGreaterThan(200);
  });

  it("renders what Markdown renders of the same text along the whole 4,000-token reply", () => {
    let text = "";
    stream.forEach((t, i) => {
      text += t;
      if (i % 211 === 0) expect(streamed(text), `token ${i}`).toBe(whole(text));
    });
    expect(streamed(reply)).toBe(whole(reply));
  });

  it("keeps the sanitizer: hostile markup in a settled block and in the open one renders as in Markdown", () => {
    const evil = "[x](javascript:alert(1))\n\n<img src=x onerror=alert(2)>\n\n![t](https://evil.example/p.png)\n\n$\\href{javascript:alert(3)}{x}$\n\n<details open ontoggle=alert(4)>";
    for (let n = 1; n <= evil.length; n++) expect(streamed(evil.slice(0, n))).toBe(whole(evil.slice(0, n)));
    expect(streamed(evil)).not.toMatch(/<img|<details|\son\w+="|href="javascript/i);
    expect(streamed(evil)).toContain("&lt;img src=x onerror=alert(2)&gt;");
  });

  it("renders a 4,000-token stream in time proportional to the open block, not to the reply", () => {
    // The page takes the tokens in every 50 ms (chat-slice.ts): 16 tokens an update is a stream of about 320 tokens/s.
    // Per update it renders the blocks that settled with it and the open block (settled ones are memoized).
    const perUpdate = 16;
    const blocks = new MarkdownBlocks();
    let settledBefore = 0;
    let updates = 0;
    const t0 = performance.now();
    for (let n = perUpdate; n < stream.length + perUpdate; n += perUpdate) {
      const { settled, open } = blocks.update(stream.slice(0, n).join(""));
      for (const b of settled.slice(settledBefore)) whole(b);
      settledBefore = settled.length;
      whole(open);
      updates++;
    }
    const blockwiseMs = performance.now() - t0;
    // The old way, the whole text rendered on each update: timed on every 10th update, times 10.
    const t1 = performance.now();
    for (let n = perUpdate * 10; n < stream.length + perUpdate; n += perUpdate * 10) whole(stream.slice(0, n).join(""));
    const wholeMs = (performance.now() - t1) * 10;
    console.log(`markdown-blocks: ${stream.length} tokens in ${updates} updates: block by block ${blockwiseMs.toFixed(0)} ms, ` +
      `the whole text each time about ${wholeMs.toFixed(0)} ms`);
    expect(blockwiseMs).toBeLessThan(wholeMs / 4);
  });
});
