// Context shift arithmetic against a counter whose token counts are known:
// every message costs 4 tokens of framing plus one token per word, the
// generation prompt 3.
import { describe, expect, it } from "vitest";

import type { ChatMessage } from "../../shared/runtime-contract.js";
import { defaultReplyReserve, fitHistory, minimumReplyRoom, replyReserve, turnStarts } from "./context-window.js";

const words = (n: number, w = "word") => Array.from({ length: n }, () => w).join(" ");
const cost = (m: ChatMessage) => 4 + m.content.split(" ").filter(Boolean).length;
function counter() {
  const seen: ChatMessage[][] = [];
  const render = async (messages: ChatMessage[]) => {
    seen.push(messages);
    const n = messages.reduce((s, m) => s + cost(m), 3);
    return Array.from({ length: n }, (_, i) => i);
  };
  return { render, seen };
}
/** `turns` exchanges of a 6-word question and a 16-word answer, then a last question. */
function chat(turns: number): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let i = 0; i < turns; i++) out.push({ role: "user", content: words(6, `q${i}`) }, { role: "assistant", content: words(16, `a${i}`) });
  out.push({ role: "user", content: words(6, "last") });
  return out;
}

describe("replyReserve", () => {
  it("keeps a quarter of the context (16 to 2048 tokens) without max tokens, else max tokens, at most half the context", () => {
    expect(defaultReplyReserve(512)).toBe(128);
    expect(defaultReplyReserve(32)).toBe(16);
    expect(defaultReplyReserve(32768)).toBe(2048);
    expect(replyReserve(512, null)).toBe(128);
    expect(replyReserve(512, 100)).toBe(100);
    expect(replyReserve(512, 4000)).toBe(256);
    expect(replyReserve(24, null)).toBe(12);  // the floor of 16 would be more than half
  });
});

describe("fitHistory", () => {
  const system = "be brief";  // 4 + 2 = 6 tokens

  it("sends the whole history when it fits, with one render", async () => {
    const c = counter();
    const h = chat(2);  // 3 + 6 + 2 * (10 + 20) + 10 = 79
    const fit = await fitHistory(system, h, { contextSize: 200, reserve: 100, policy: "shift" }, c.render);
    expect(fit).toMatchObject({ kind: "fits", start: 0 });
    expect(fit.kind === "fits" && fit.tokens.length).toBe(79);
    expect(c.seen).toHaveLength(1);
    expect(c.seen[0]![0]).toEqual({ role: "system", content: system });
  });

  it("drops the fewest whole turns from the oldest on, keeps the system prompt, and renders about log2(turns) times", async () => {
    const c = counter();
    const h = chat(40);  // 9 + 40 * 30 + 10 = 1219 tokens
    const options = { contextSize: 512, reserve: 128, policy: "shift" as const };
    const fit = await fitHistory(system, h, options, c.render);
    expect(fit.kind).toBe("fits");
    if (fit.kind !== "fits") return;
    // 9 + 10 + 30k <= 384 → k = 12 turns kept: the prompt starts at turn 28's question.
    expect(fit.start).toBe(56);
    expect(h[fit.start]).toEqual({ role: "user", content: words(6, "q28") });
    expect(fit.tokens.length).toBe(9 + 10 + 12 * 30);
    expect(fit.tokens.length + options.reserve).toBeLessThanOrEqual(options.contextSize);
    // One more turn would not have fitted.
    expect(9 + 10 + 13 * 30).toBeGreaterThan(options.contextSize - options.reserve);
    expect(c.seen.every((p) => p[0]!.role === "system" && p.at(-1)!.content === words(6, "last"))).toBe(true);
    expect(c.seen.length).toBeLessThanOrEqual(2 + Math.ceil(Math.log2(40)));
  });

  it("policy stop: refuses instead of dropping anything", async () => {
    const c = counter();
    expect(await fitHistory(system, chat(40), { contextSize: 512, reserve: 128, policy: "stop" }, c.render))
      .toEqual({ kind: "full", promptTokens: 1219 });
    expect(c.seen).toHaveLength(1);
  });

  it("a last turn over the budget is still sent while a reply has some room; beyond that it is too long", async () => {
    const h = chat(3);
    h[h.length - 1] = { role: "user", content: words(300) };  // 9 + 304 = 313 tokens alone
    const room = await fitHistory(system, h, { contextSize: 400, reserve: 128, policy: "shift" }, counter().render);
    expect(room).toMatchObject({ kind: "fits", start: 6 });
    expect(minimumReplyRoom(320)).toBe(40);
    expect(await fitHistory(system, h, { contextSize: 320, reserve: 80, policy: "shift" }, counter().render))
      .toEqual({ kind: "too_long", promptTokens: 313 });
  });

  it("without a system prompt sends none", async () => {
    const c = counter();
    await fitHistory("  ", chat(1), { contextSize: 100, reserve: 10, policy: "shift" }, c.render);
    expect(c.seen[0]!.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
  });
});

describe("turnStarts", () => {
  it("starts a turn at every user message", () => {
    const r = (role: ChatMessage["role"]) => ({ role, content: "x" });
    expect(turnStarts([r("user"), r("assistant"), r("user"), r("user"), r("assistant"), r("assistant"), r("user")])).toEqual([0, 2, 3, 6]);
    expect(turnStarts([r("assistant"), r("user")])).toEqual([0, 1]);
  });
});
