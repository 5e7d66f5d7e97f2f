// A reply's reasoning in the thread, as static HTML: a harmony reply (gpt-oss)
// gets the same collapsible block as a `<think>` one, open with "Thinking…"
// while its analysis streams, and no control token ever shows.
import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { beforeAll, describe, expect, it, vi } from "vitest";

import type { Message } from "../../shared/app-contract.js";

type View = typeof import("./MessageView.js").MessageView;
let MessageView: View;

beforeAll(async () => {
  // The store's transport reads window when it is imported (web mode's base URL); it is never used here.
  vi.stubGlobal("window", { location: { href: "http://127.0.0.1/" } });
  ({ MessageView } = await import("./MessageView.js"));
});

function reply(content: string, streaming: boolean): string {
  const m: Message = {
    id: "r1", conversationId: "c1", role: "assistant", content, status: streaming ? "streaming" : "complete", createdAt: "2025-01-01T00:00:00Z",
    stats: null, error: null, parentId: "u1", siblingIds: ["r1"], model: "gpt-oss-20b", edited: false, contextFrom: null,
  };
  return renderToStaticMarkup(createElement(MessageView, { m, streaming, position: null, idle: !streaming, inContext: true }));
}

/** The reasoning block and what follows it (the answer), without the message's toolbar (its copy button holds the raw text). */
function body(html: string): string {
  return html.slice(html.indexOf("<details"));
}

describe("MessageView: reasoning", () => {
  it("renders a harmony reply's analysis as the collapsed reasoning block and its final text as the answer", () => {
    const html = body(reply("<|channel|>analysis<|message|>The user says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>", false));
    expect(html).toMatch(/^<details class="reasoning" data-testid="reasoning"><summary>Reasoning<\/summary>/);
    expect(html).toContain("The user says hi.");
    expect(html).toMatch(/<\/details><div class="markdown[^"]*"><p>Hello!<\/p>/);
    expect(html).not.toContain("&lt;|");
    expect(html).not.toContain("<|");
  });

  it("shows it open, as thinking, while the analysis streams, also when the text stops inside a token", () => {
    const html = body(reply("<|channel|>analysis<|message|>Considering<|en", true));
    expect(html).toMatch(/^<details class="reasoning" open="" data-testid="reasoning"><summary>Thinking…<\/summary>/);
    expect(html).toContain("Considering");
    expect(html).not.toContain("&lt;|");
  });

  it("renders a <think> reply the same way", () => {
    const html = body(reply("<think>The user says hi.</think>\n\nHello!", false));
    expect(html).toMatch(/^<details class="reasoning" data-testid="reasoning"><summary>Reasoning<\/summary>/);
    expect(html).toMatch(/<\/details><div class="markdown[^"]*"><p>Hello!<\/p>/);
  });
});
