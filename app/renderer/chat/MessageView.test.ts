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

function reply(content: string, streaming: boolean, stats: Message["stats"] = null): string {
  const m: Message = {
    id: "r1", conversationId: "c1", role: "assistant", content, status: streaming ? "streaming" : "complete", createdAt: "2025-01-01T00:00:00Z",
    stats, error: null, parentId: "u1", siblingIds: ["r1"], model: "gpt-oss-20b", edited: false, contextFrom: null,
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

describe("MessageView: the reply's stats", () => {
  const stats = (extra: Partial<NonNullable<Message["stats"]>>): NonNullable<Message["stats"]> => ({
    promptTokens: 12, generatedTokens: 40, tokensPerSecond: 51.2, ttftMs: 33.4, queueMs: 0, stopReason: "length", contextSize: 4096, ...extra,
  });
  const statsText = (html: string) => {
    const m = /<div class="stats" data-testid="message-stats">(.*?)<\/div>/.exec(html);
    return (m?.[1] ?? "").replace(/<[^>]+>/g, "");
  };

  it("shows the acceptance rate and tokens per window beside tok/s when the MTP block drafted", () => {
    const html = reply("Hi", false, stats({ draftTokens: 30, acceptedDraftTokens: 15, windows: 25, drafter: "mtp" }));
    expect(html).toContain('data-testid="draft-stats"');
    expect(statsText(html)).toBe("40 tokens · 51.2 tok/s · 50% of drafts accepted · 1.60 tokens/window · TTFT 33 ms · stop: max tokens reached (length)");
  });

  it("shows nothing of drafts when none were made, or for a reply stored before they were counted", () => {
    for (const s of [stats({ draftTokens: 0, acceptedDraftTokens: 0, windows: 40, drafter: "none" }), stats({ draftTokens: 0, acceptedDraftTokens: 0, windows: 40, drafter: "mtp" }), stats({})]) {
      const html = reply("Hi", false, s);
      expect(html).not.toContain("draft-stats");
      expect(statsText(html)).toBe("40 tokens · 51.2 tok/s · TTFT 33 ms · stop: max tokens reached (length)");
    }
  });
});

describe("MessageView: a streaming reply", () => {
  it("renders each part block by block while it streams as the same text renders whole, and once complete as a stored reply", async () => {
    const { Markdown } = await import("../common/Markdown.js");
    const { splitReasoning } = await import("../common/reasoning.js");
    const whole = (text: string, className?: string) => renderToStaticMarkup(createElement(Markdown, className ? { text, className } : { text }));
    const text = "<think>\nFirst:\n\n- a\n- b\n\n```ts\nlet x = 1;\n\nx++;\n```\n</think>\n\n## Answer\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n$$\nx^2\n\n$$\n\n1. one\n\n2. two\n";
    for (let n = 1; n <= text.length; n++) {
      const prefix = text.slice(0, n);
      const parts = splitReasoning(prefix);
      const html = reply(prefix, true);
      if (parts.reasoning !== null) expect(html, prefix).toContain(whole(parts.reasoning, "reasoning-text"));
      expect(html, prefix).toContain(whole(parts.answer));
    }
    // Complete: the stored reply's render, whatever the stream showed.
    const done = reply(text, false);
    expect(done).toContain(whole(splitReasoning(text, { complete: true }).answer));
    expect(body(done)).toMatch(/^<details class="reasoning" data-testid="reasoning"><summary>Reasoning<\/summary><div class="reasoning-text">/);
  });
});
