import { describe, expect, it } from "vitest";

import { highlight } from "./highlight.js";
import { parseMarkdown } from "./markdown.js";

describe("parseMarkdown", () => {
  it("reads code fences (also unfinished ones while streaming), lists, headings and inline marks", () => {
    const blocks = parseMarkdown("# Title\n\nSome **bold** and `code` and *it*.\n\n- one\n- two\n\n```ts\nconst a = 1;\n```\n\n```py\nx = 1");
    expect(blocks.map((b) => b.t)).toEqual(["heading", "paragraph", "list", "code", "code"]);
    expect(blocks[1]).toMatchObject({ children: [{ t: "text" }, { t: "strong" }, { t: "text" }, { t: "code", text: "code" }, { t: "text" }, { t: "em" }, { t: "text" }] });
    expect(blocks[3]).toMatchObject({ lang: "ts", text: "const a = 1;", open: false });
    expect(blocks[4]).toMatchObject({ lang: "py", text: "x = 1", open: true });
  });

  it("keeps links to http(s) only", () => {
    expect(parseMarkdown("[a](https://x.org) [b](javascript:alert(1))")[0]).toMatchObject({
      children: [{ t: "link", href: "https://x.org" }, { t: "text", text: " [b](javascript:alert(1))" }],
    });
  });
});

describe("highlight", () => {
  it("marks keywords, strings, numbers and comments, and loses no text", () => {
    const code = 'const s = "hi"; // note\nreturn 42;';
    const tokens = highlight(code, "ts");
    expect(tokens.map((t) => t.text).join("")).toBe(code);
    expect(tokens.filter((t) => t.kind !== "plain").map((t) => [t.kind, t.text])).toEqual([
      ["keyword", "const"], ["string", '"hi"'], ["comment", "// note"], ["keyword", "return"], ["number", "42"],
    ]);
  });
});
