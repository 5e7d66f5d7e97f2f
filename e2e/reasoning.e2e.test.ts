// Reasoning in the chat, in Debian's Chromium (headless), in web mode, against
// the real services and runtime, replies paced (harness.ts, e2ePacing) so the
// page sees them grow. The demo model never writes reasoning, so the replies
// come from copies of it whose vocabulary spells a few tokens differently
// (app/test/vocab-model.ts): the same weights generate the same token ids,
// which now read as a `<think>` block, or as gpt-oss's harmony channels
// (analysis, then final), with hostile markup inside the reasoning. The page
// must show the reasoning in a collapsed "Reasoning" disclosure (open, as
// "Thinking…", while it streams), the answer outside it, no marker or control
// token anywhere, and the markup as inert text; the same after a reload (the
// stored message).
import path from "node:path";

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { GenerationResult } from "../app/shared/runtime-contract.js";
import { fromByteLevel, modelWithTokens, readTokens, toByteLevel } from "../app/test/vocab-model.js";
import { artifactsDir, buildRenderer, chromiumPath, openAppInChromium, serveWebMode, type Served } from "./harness.js";

const browserPath = chromiumPath();
if ("reason" in browserPath) console.warn(`reasoning e2e skipped: ${browserPath.reason}`);

/** Greedy, and long enough for the demo model's whole answer to these questions (it ends them itself). */
const settings = { temperature: 0, maxTokens: 48 };

/** What a page state records of the reply (see recordStates). */
interface ReplyState {
  status: string | null;
  /** null: no reasoning block. */
  open: boolean | null;
  summary: string | null;
  reasoning: string | null;
  answer: string;
  /** script, img and on* handler elements in the message: what the reasoning's markup would make, were it parsed as HTML. */
  live: number;
}

/** The demo model's greedy reply to a question, token by token, and how it splits into reasoning and answer. */
interface Plan {
  question: string;
  result: GenerationResult;
  /** The last token of the reasoning: the marker that ends it goes after it. */
  split: number;
  /** A token of the reasoning (not the first) that gets hostile markup after it. */
  hostile: number;
}

const squash = (s: string) => s.replace(/\s+/g, " ").trim();

describe.skipIf("reason" in browserPath)("reasoning in the chat, in Chromium", () => {
  let served: Served;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const results: GenerationResult[] = [];
  const plans = new Map<string, Plan>();
  const vocab = readTokens();
  const contract = () => served.web.services.contract;
  const lastAssistant = () => page.locator("[data-testid=message-assistant]").last();
  const shot = (name: string) => page.screenshot({ path: path.join(artifactsDir, `${name}.png`) });

  /** The text token ids read as, with the demo model's spellings. */
  const read = (ids: readonly number[]) => fromByteLevel(ids.map((id) => vocab[id]!).join(""));

  /** Asks the demo model `question` in a new chat through the contract (the page's own calls); picks the tokens to re-spell. */
  const discover = async (question: string): Promise<Plan> => {
    const before = results.length;
    const conversation = await contract().chat.createConversation({ title: `discovery: ${question}`, settings });
    await contract().chat.send({ conversationId: conversation.id, content: question });
    // In beforeAll, where expect.poll is not available.
    for (const end = Date.now() + 60_000; results.length === before || (await contract().chat.messages({ conversationId: conversation.id })).at(-1)?.status !== "complete";) {
      if (Date.now() > end) throw new Error(`no reply to ${JSON.stringify(question)} within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const result = results.at(-1)!;
    if (result.stopReason !== "eos") throw new Error(`the demo model's reply to ${JSON.stringify(question)} did not end by itself (${result.stopReason}): ${JSON.stringify(result.text)}`);
    // Tokens that occur once in the reply and never in the prompt: spelling them differently changes only that place.
    const once = (i: number) => result.tokens.filter((t) => t === result.tokens[i]).length === 1 && !result.promptTokens.includes(result.tokens[i]!);
    const positions = result.tokens.map((_, i) => i);
    // The reasoning ends with a sentence of the reply where there is one past its first third, else halfway.
    const candidates = positions.filter((i) => i >= result.tokens.length / 3 && i < result.tokens.length - 2 && once(i));
    const split = candidates.find((i) => /[.!?]["')]*$/.test(read([result.tokens[i]!]))) ?? candidates.find((i) => i >= result.tokens.length / 2);
    const hostile = positions.find((i) => i > 0 && split !== undefined && i < split && once(i));
    if (!once(0) || split === undefined || hostile === undefined)
      throw new Error(`the demo model's reply to ${JSON.stringify(question)} has no tokens to re-spell: ${JSON.stringify(result.text)}`);
    return { question, result, split, hostile };
  };

  beforeAll(async () => {
    served = await serveWebMode({ rendererDir: await buildRenderer() });
    served.web.services.host.subscribe((e) => { if (e.type === "done") results.push(e.result); });
    ({ browser, page } = await openAppInChromium(served, (browserPath as { path: string }).path, pageErrors));
    for (const [kind, question] of [["think", "What does river mean?"], ["harmony", "What does happy mean?"]] as const) plans.set(kind, await discover(question));
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
  });

  /** Loads a copy of the demo model with these spellings (byte-level text appended before or after a token's own). */
  const loadRespelled = async (name: string, plan: Plan, spell: (id: number, at: number) => string | null) => {
    const spellings = new Map<number, string>();
    plan.result.tokens.forEach((id, at) => {
      const s = spell(id, at);
      if (s !== null) spellings.set(id, s);
    });
    const file = modelWithTokens(spellings, name, served.dataDir);
    await contract().models.load({ path: file, settings: { threads: 2 } });
    await expect.poll(() => page.locator(".model-tag").textContent(), { timeout: 60_000 }).toBe(`${name}.gguf`);
  };

  /** The page keeps every state of the last reply while it streams (no polling interval can miss one). */
  const recordStates = () => page.evaluate(() => {
    const w = window as unknown as { __states: ReplyState[]; __observer?: MutationObserver };
    w.__states = [];
    w.__observer?.disconnect();
    w.__observer = new MutationObserver(() => {
      const all = document.querySelectorAll("[data-testid=message-assistant]");
      const last = all[all.length - 1];
      if (!last) return;
      const details = last.querySelector<HTMLDetailsElement>("details[data-testid=reasoning]");
      const state: ReplyState = {
        status: last.getAttribute("data-status"),
        open: details ? details.open : null,
        summary: details?.querySelector("summary")?.textContent ?? null,
        reasoning: details?.querySelector(".reasoning-text")?.textContent ?? null,
        answer: last.querySelector(":scope > .markdown")?.textContent ?? "",
        live: last.querySelectorAll("script, img, [onerror]").length,
      };
      if (JSON.stringify(w.__states.at(-1)) !== JSON.stringify(state)) w.__states.push(state);
    });
    w.__observer.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  const states = () => page.evaluate(() => (window as unknown as { __states: ReplyState[] }).__states);

  /** A new chat with the greedy settings, set through the settings panel; asks the plan's question there. */
  const askInNewChat = async (plan: Plan) => {
    const count = (await contract().chat.listConversations()).length;
    await page.getByTestId("new-chat").click();
    await expect.poll(async () => (await contract().chat.listConversations()).length).toBe(count + 1);
    await expect.poll(() => page.locator("[data-testid=messages] .message").count()).toBe(0);
    await page.getByRole("button", { name: "Settings" }).click();
    await page.getByTestId("chat-settings").waitFor();
    await page.getByLabel("Temperature").fill(String(settings.temperature));
    await page.getByLabel("Max tokens").fill(String(settings.maxTokens));
    await page.getByRole("button", { name: "Settings" }).click();  // closing saves
    await expect.poll(async () => (await contract().chat.listConversations())[0]!.settings).toMatchObject(settings);
    const conversationId = (await contract().chat.listConversations())[0]!.id;
    await recordStates();
    const before = results.length;
    await page.getByLabel("Message").fill(plan.question);
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    await expect.poll(() => results.length).toBe(before + 1);
    // The copy generated what the demo model did, from the same prompt: only the spellings differ.
    const result = results.at(-1)!;
    expect(result.promptTokens).toEqual(plan.result.promptTokens);
    expect(result.tokens).toEqual(plan.result.tokens);
    return { conversationId, result };
  };

  /**
   * What the page must show of a finished reply, the one just streamed or the
   * stored one after a reload: the reasoning collapsed under "Reasoning", the
   * answer outside it; opened, the reasoning, its markup as text.
   */
  const expectCollapsedReasoning = async (reasoning: string, answer: string, markup: string[], screenshot?: string) => {
    const reply = lastAssistant();
    const details = reply.locator("details[data-testid=reasoning]");
    const summary = details.locator("> summary");
    const text = details.locator(".reasoning-text");
    await expect.poll(() => details.count()).toBe(1);
    expect(await details.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await summary.textContent()).toBe("Reasoning");
    expect(await text.isVisible()).toBe(false);
    // The answer is the message's own markdown, outside the disclosure, and holds none of the reasoning.
    const shown = reply.locator(":scope > .markdown");
    expect(await shown.count()).toBe(1);
    expect(await shown.isVisible()).toBe(true);
    expect(squash((await shown.textContent()) ?? "")).toBe(squash(answer));
    expect(squash((await details.textContent()) ?? "")).not.toContain(squash(answer));
    // No marker or control token anywhere in the message's body.
    const body = (await reply.evaluate((a) => Array.from(a.children).filter((c) => !c.classList.contains("role")).map((c) => c.textContent).join("\n"))) ?? "";
    expect(body).not.toMatch(/<\/?think>|<\|/);
    // Opened by a click, it shows the reasoning; the markup in it is text, never an element.
    await summary.click();
    await expect.poll(() => text.isVisible()).toBe(true);
    expect(await details.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(true);
    expect(squash((await text.textContent()) ?? "")).toBe(squash(reasoning));
    for (const m of markup) expect(await text.textContent()).toContain(m);
    expect(await reply.locator("script, img, [onerror]").count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    if (screenshot) await shot(screenshot);
    // And a second click closes it.
    await summary.click();
    await expect.poll(() => text.isVisible()).toBe(false);
  };

  /** The states the page went through while the reply streamed: thinking (open, no answer yet), then answering with the block closed. */
  const expectStreamedStates = async (reasoning: string, beforeLastToken: string) => {
    const seen = (await states()).filter((s) => s.status === "streaming");
    const thinking = seen.filter((s) => s.open === true && s.summary === "Thinking…" && s.answer === "" && !!s.reasoning);
    expect(thinking.length, JSON.stringify(seen)).toBeGreaterThanOrEqual(2);
    // Each is the reasoning so far.
    for (const s of thinking) expect(squash(reasoning).startsWith(squash(s.reasoning!)), JSON.stringify(s)).toBe(true);
    expect(seen.findIndex((s) => s.open !== null), JSON.stringify(seen)).toBe(seen.indexOf(thinking[0]!));
    expect(seen.filter((s) => s.answer !== "").length, JSON.stringify(seen)).toBeGreaterThanOrEqual(1);
    // Before the first token the reply is empty; from it on, the block is there. No state ever showed a marker, a control token or a live element.
    for (const s of seen) {
      if (s.open === null) expect(s, JSON.stringify(seen)).toMatchObject({ reasoning: null, answer: "" });
      expect(`${s.reasoning ?? ""}\n${s.answer}`, JSON.stringify(s)).not.toMatch(/<\/?think>|<\|/);
      expect(s.live).toBe(0);
    }
    // The reasoning only grew, up to its last token: the one the closing marker comes with, which ends the thinking.
    for (let i = 1; i < thinking.length; i++) expect(squash(thinking[i]!.reasoning!).length).toBeGreaterThan(squash(thinking[i - 1]!.reasoning!).length);
    expect(squash(thinking.at(-1)!.reasoning!)).toBe(squash(beforeLastToken));
    // Once closed, the block stays closed, as "Reasoning", and holds the whole reasoning.
    const closed = seen.slice(seen.indexOf(thinking.at(-1)!) + 1);
    expect(closed.length).toBeGreaterThanOrEqual(1);
    for (const s of closed) expect(s, JSON.stringify(s)).toMatchObject({ open: false, summary: "Reasoning" });
    for (const s of closed) expect(squash(s.reasoning ?? "")).toBe(squash(reasoning));
  };

  const reopen = async (conversationId: string, question: string) => {
    await page.reload();
    // The chat's title is its first message (the discovery chats have titles of their own).
    const title = (await contract().chat.listConversations()).find((c) => c.id === conversationId)!.title;
    expect(title).toBe(question);
    await page.getByTestId("conversation-list").getByText(title, { exact: true }).first().click();
    await expect.poll(() => lastAssistant().getAttribute("data-status")).toBe("complete");
  };

  it("streams a <think> reply into an open “Thinking…” block, then shows it collapsed as “Reasoning” above the answer; markup in it is inert", async () => {
    const plan = plans.get("think")!;
    const hostileMarkup = ["<script>window.__pwned = 1</script>", "<img src=x onerror=\"window.__pwned = 2\">"];
    const { tokens } = plan.result;
    await loadRespelled("think-respelled", plan, (id, at) => {
      if (at === 0) return toByteLevel("<think>") + vocab[id]!;
      if (at === plan.hostile) return vocab[id]! + toByteLevel(`\n\n${hostileMarkup.join("\n\n")}\n\n`);
      if (at === plan.split) return vocab[id]! + toByteLevel("</think>\n\n");
      return null;
    });
    const reasoningOf = (n: number) => `${read(tokens.slice(0, plan.hostile + 1))}\n\n${hostileMarkup.join("\n\n")}\n\n${read(tokens.slice(plan.hostile + 1, n))}`;
    const reasoning = reasoningOf(plan.split + 1);
    const answer = read(tokens.slice(plan.split + 1)).trim();

    const { conversationId, result } = await askInNewChat(plan);
    // The reply as stored: the whole text, markers and all.
    expect(result.text).toBe(`<think>${reasoning}</think>\n\n${read(tokens.slice(plan.split + 1))}`);
    const stored = (await contract().chat.messages({ conversationId })).at(-1)!;
    expect(stored.content).toBe(result.text);

    await expectStreamedStates(reasoning, reasoningOf(plan.split));
    await expectCollapsedReasoning(reasoning, answer, hostileMarkup, "chat-reasoning-think");

    // The stored message, after a reload, is shown the same way.
    await reopen(conversationId, plan.question);
    await expectCollapsedReasoning(reasoning, answer, hostileMarkup);
    expect(pageErrors).toEqual([]);
  });

  it("renders gpt-oss's harmony analysis channel the same way, with no control token showing", async () => {
    const plan = plans.get("harmony")!;
    const hostileMarkup = ["<img src=x onerror=\"window.__pwned = 3\">", "<script>window.__pwned = 4</script>"];
    const { tokens } = plan.result;
    const last = tokens.length - 1;
    await loadRespelled("harmony-respelled", plan, (id, at) => {
      if (at === 0) return toByteLevel("<|channel|>analysis<|message|>") + vocab[id]!;
      if (at === plan.hostile) return vocab[id]! + toByteLevel(`\n\n${hostileMarkup.join("\n\n")}\n\n`);
      if (at === plan.split) return vocab[id]! + toByteLevel("<|end|><|start|>assistant<|channel|>final<|message|>");
      if (at === last) return vocab[id]! + toByteLevel("<|return|>");
      return null;
    });
    const reasoningOf = (n: number) => `${read(tokens.slice(0, plan.hostile + 1))}\n\n${hostileMarkup.join("\n\n")}\n\n${read(tokens.slice(plan.hostile + 1, n))}`;
    const reasoning = reasoningOf(plan.split + 1);
    const answer = read(tokens.slice(plan.split + 1)).trim();

    const { conversationId, result } = await askInNewChat(plan);
    expect(result.text).toBe(`<|channel|>analysis<|message|>${reasoning}<|end|><|start|>assistant<|channel|>final<|message|>${read(tokens.slice(plan.split + 1))}<|return|>`);

    await expectStreamedStates(reasoning, reasoningOf(plan.split));
    await expectCollapsedReasoning(reasoning, answer, hostileMarkup, "chat-reasoning-harmony");

    await reopen(conversationId, plan.question);
    await expectCollapsedReasoning(reasoning, answer, hostileMarkup);
    expect(pageErrors).toEqual([]);
  });
});
