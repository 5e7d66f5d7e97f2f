// The chat in Debian's Chromium (headless), in web mode, against the real
// services, runtime and embedded demo model (context 512), replies at the
// model's own speed: a long chat keeps answering (context shift), a reply is
// not capped at 512 tokens, versions survive a reload, markdown tables and
// math render while hostile markup does not run, copy and import work.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { embeddedModelPath } from "../app/main/paths.js";
import { artifactsDir, buildRenderer, chromiumPath, openAppInChromium, serveWebMode, type Served } from "./harness.js";

const browserPath = chromiumPath();
if ("reason" in browserPath) console.warn(`chat e2e skipped: ${browserPath.reason}`);

describe.skipIf("reason" in browserPath)("the chat in Chromium", () => {
  let served: Served;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const contract = () => served.web.services.contract;
  const lastAssistant = () => page.locator("[data-testid=message-assistant]").last();
  const shot = (name: string) => page.screenshot({ path: path.join(artifactsDir, `${name}.png`) });

  beforeAll(async () => {
    served = await serveWebMode({ paced: false, rendererDir: await buildRenderer() });
    ({ browser, page } = await openAppInChromium(served, (browserPath as { path: string }).path, pageErrors, { height: 900, clipboard: true }));
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
  });

  /** Sends a message and waits for its reply to end; returns the reply's status. */
  const ask = async (text: string) => {
    const before = await page.locator("[data-testid=message-assistant]").count();
    await page.getByLabel("Message").fill(text);
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => page.locator("[data-testid=message-assistant]").count(), { timeout: 30_000 }).toBe(before + 1);
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).not.toBe("streaming");
    return lastAssistant().getAttribute("data-status");
  };
  const openSettings = async () => {
    await page.getByRole("button", { name: "Settings" }).click();
    await page.getByTestId("chat-settings").waitFor();
  };
  const closeSettings = async () => {
    await page.getByRole("button", { name: "Settings" }).click();
    await expect.poll(() => page.getByTestId("chat-settings").count()).toBe(0);
  };
  /** A new, empty chat, shown (the list and the thread follow the click asynchronously). */
  const newChat = async () => {
    const before = (await contract().chat.listConversations()).length;
    await page.getByTestId("new-chat").click();
    await expect.poll(async () => (await contract().chat.listConversations()).length).toBe(before + 1);
    await expect.poll(() => page.locator("[data-testid=messages] .message").count()).toBe(0);
  };
  const selectedId = async () => (await contract().chat.listConversations())[0]!.id;

  it("keeps answering a 40-turn chat: the oldest turns leave the model's context, and the page shows which", async () => {
    await newChat();
    await openSettings();
    // Short, greedy replies keep the 40 turns quick; the chat still outgrows the 512-token context many times over.
    await page.getByLabel("Temperature").fill("0");
    await page.getByLabel("Max tokens").fill("24");
    expect(await page.getByTestId("settings-state").textContent()).toBe("● Unsaved changes");
    await page.getByTestId("chat-settings").getByRole("button", { name: "Save" }).click();
    await expect.poll(() => page.getByTestId("settings-state").textContent()).toBe("Saved with this chat");
    await closeSettings();
    const id = await selectedId();
    expect((await contract().chat.listConversations())[0]!.settings).toMatchObject({ temperature: 0, maxTokens: 24, overflow: "shift" });
    const words = ["river", "happy", "abandon", "light", "stone", "music", "garden", "winter"];
    for (let turn = 0; turn < 40; turn++) {
      expect(await ask(`Turn ${turn}: what does ${words[turn % words.length]} mean?`), `turn ${turn}`).toBe("complete");
    }
    await expect.poll(() => page.locator("[data-testid=message-assistant]").count()).toBe(40);
    // Every turn is still in the chat; the early ones are marked as out of the model's context.
    const saved = await contract().chat.messages({ conversationId: id });
    expect(saved).toHaveLength(80);
    expect(saved.every((m) => m.status === "complete")).toBe(true);
    const divider = page.getByTestId("context-divider");
    expect(await divider.textContent()).toMatch(/^The model no longer sees the \d+ messages above/);
    const out = await page.locator(".message[data-in-context=false]").count();
    expect(out).toBeGreaterThan(20);
    expect(out).toBe(saved.findIndex((m) => m.id === saved.at(-1)!.contextFrom));
    expect(await page.locator(".message[data-in-context=false]").first().textContent()).toContain("Turn 0: what does river mean?");
    const meter = (await page.getByTestId("context-meter").textContent()) ?? "";
    const [, used, limit] = /Context (\d+) \/ (\d+)/.exec(meter) ?? [];
    expect(Number(limit)).toBe(512);
    expect(Number(used)).toBeGreaterThan(256);
    expect(Number(used)).toBeLessThanOrEqual(512);
    expect(await lastAssistant().getByTestId("stop-reason").textContent()).toMatch(/stop: (finished \(eos\)|max tokens reached \(length\))/);
    await divider.scrollIntoViewIfNeeded();
    await shot("chat-context-shift");
  }, 300_000);

  it("policy stop: a full chat says so and carries on in a new chat from a summary the model wrote and the user edited", async () => {
    await newChat();
    await openSettings();
    await page.getByLabel("Temperature").fill("0");
    await page.getByLabel("Max tokens").fill("24");
    await page.getByLabel("When the context is full").selectOption("stop");
    await closeSettings();
    await expect.poll(async () => (await contract().chat.listConversations())[0]!.settings.overflow).toBe("stop");
    const id = await selectedId();
    let status: string | null = "complete";
    for (let turn = 0; turn < 40 && status === "complete"; turn++) status = await ask(`Turn ${turn}: what does river mean?`);
    expect(status).toBe("error");
    expect(await lastAssistant().textContent()).toMatch(/This chat is full: its \d+ tokens and room for a reply \(24\) do not fit in the model's context of 512 tokens/);
    expect(await lastAssistant().getByTestId("stop-reason").textContent()).toBe(" · stop: context full (context)");
    expect(await page.getByTestId("context-full").textContent()).toMatch(/This chat has filled the model's context/);
    await page.getByRole("button", { name: "New chat with a summary…" }).click();
    const dialog = page.getByTestId("summary-dialog");
    const summary = dialog.getByLabel("Summary");
    await expect.poll(() => summary.inputValue(), { timeout: 60_000 }).not.toBe("");
    const written = await summary.inputValue();
    await summary.fill(written + " The user studies words.");
    await dialog.getByRole("button", { name: "Start the new chat" }).click();
    await expect.poll(() => page.locator(".thread-head h2").textContent()).toMatch(/\(continued\)$/);
    const next = (await contract().chat.listConversations())[0]!;
    expect(next.id).not.toBe(id);
    expect(next.settings).toMatchObject({ overflow: "stop", maxTokens: 24, temperature: 0 });
    expect(next.settings.systemPrompt).toBe(`You are a helpful assistant.\n\nSummary of the earlier conversation:\n${written} The user studies words.`);
    expect(await ask("What does happy mean?")).toBe("complete");
  });

  it("lets a reply run past 512 tokens when max tokens is unset (no cap of the app's own)", async () => {
    // Context 1024 for the demo model (trained on 512); no system prompt, greedy and a repeat penalty below 1 make it loop.
    await contract().models.load({ path: embeddedModelPath(), settings: { threads: 2, contextSize: 1024 } });
    await expect.poll(() => page.locator(".model-tag").textContent(), { timeout: 60_000 }).toContain("guild-demo");
    await newChat();
    await openSettings();
    await page.getByLabel("System prompt").fill("");
    await page.getByLabel("Temperature").fill("0");
    await page.getByLabel("Repeat penalty").fill("0.5");
    expect(await page.getByLabel("Max tokens").inputValue()).toBe("");
    expect(await page.getByLabel("Max tokens").getAttribute("placeholder")).toBe("up to the context");
    await closeSettings();  // closing saves
    await expect.poll(async () => (await contract().chat.listConversations())[0]!.settings.repeatPenalty).toBe(0.5);
    expect(await ask("What does river mean?")).toBe("complete");
    const stats = (await lastAssistant().getByTestId("message-stats").textContent()) ?? "";
    expect(Number(/^(\d+) tokens/.exec(stats)?.[1])).toBeGreaterThan(512);
    expect(stats).toContain("stop: context full (context)");
    expect(await page.getByTestId("context-full").textContent()).toMatch(/The last reply filled the model's context/);
    await contract().models.load({ path: embeddedModelPath(), settings: { threads: 2 } });
    await expect.poll(async () => (await contract().models.current())?.contextSize, { timeout: 60_000 }).toBe(512);
  });

  it("keeps edits and regenerations as versions (‹ 1/2 ›) that survive a reload", async () => {
    await newChat();
    expect(await ask("What does river mean?")).toBe("complete");
    const first = (await lastAssistant().locator(".markdown").textContent()) ?? "";
    // A new version of the reply.
    await lastAssistant().getByRole("button", { name: "Regenerate reply" }).click();
    await expect.poll(() => lastAssistant().getByTestId("branch-nav").textContent(), { timeout: 30_000 }).toMatch(/2\/2/);
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    // A new version of the question, with its own reply.
    await page.locator("[data-testid=message-user]").first().getByRole("button", { name: "Edit and resend" }).click();
    await page.getByLabel("Edit message").fill("What does happy mean?");
    await page.getByLabel("Edit message").press("Enter");
    await expect.poll(() => page.locator("[data-testid=message-user]").first().getByTestId("branch-nav").textContent()).toMatch(/2\/2/);
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    expect(await page.locator("[data-testid=message-user]").first().textContent()).toContain("What does happy mean?");
    // The reply names its model.
    expect(await lastAssistant().getByTestId("message-model").textContent()).toBe("guild-demo-qwen3moe-Q8_0.gguf");

    await page.reload();
    await page.getByTestId("conversation-list").getByText("What does happy mean?").click();
    const question = page.locator("[data-testid=message-user]").first();
    await expect.poll(() => question.getByTestId("branch-nav").textContent()).toMatch(/2\/2/);
    await question.getByRole("button", { name: "Previous version" }).click();
    await expect.poll(() => question.textContent()).toContain("What does river mean?");
    expect(await question.getByTestId("branch-nav").textContent()).toMatch(/1\/2/);
    // Under the first question: both versions of its reply, the newest shown.
    expect(await lastAssistant().getByTestId("branch-nav").textContent()).toMatch(/2\/2/);
    await lastAssistant().getByRole("button", { name: "Previous version" }).click();
    await expect.poll(() => lastAssistant().getByTestId("branch-nav").textContent()).toMatch(/1\/2/);
    expect(await lastAssistant().locator(".markdown").textContent()).toBe(first);
    // The chosen path is the chat's, in the database: a reload shows it again.
    await page.reload();
    await page.getByTestId("conversation-list").getByText("What does happy mean?").click();
    await expect.poll(() => page.locator("[data-testid=message-user]").first().textContent()).toContain("What does river mean?");
    await expect.poll(() => lastAssistant().getByTestId("branch-nav").textContent()).toMatch(/1\/2/);
    await shot("chat-versions");
  });

  it("renders a markdown table as a <table> and math with KaTeX; copies a message", async () => {
    // A hand-edited version of the reply (Edit reply) goes through the same renderer as the model's text.
    const markdown = "Two words:\n\n| word | meaning |\n|---|---|\n| river | a stream |\n| happy | glad |\n\nAnd $e^{i\\pi} + 1 = 0$, also\n\n$$\n\\frac{a}{b}\n$$";
    await lastAssistant().getByRole("button", { name: "Edit reply" }).click();
    await page.getByLabel("Edit message").fill(markdown);
    await page.getByRole("button", { name: "Save version" }).click();
    const table = lastAssistant().locator(".markdown table");
    await table.waitFor();
    expect(await table.locator("th").allTextContents()).toEqual(["word", "meaning"]);
    expect(await table.locator("tbody tr").count()).toBe(2);
    expect(await lastAssistant().locator(".markdown").textContent()).not.toContain("|---|");
    expect(await lastAssistant().locator(".katex").count()).toBe(2);
    expect(await lastAssistant().locator(".katex-display .mfrac").count()).toBe(1);
    // KaTeX's fonts load from the bundle (the CSP allows 'self' only).
    await expect.poll(() => page.evaluate(() => document.fonts.check("16px KaTeX_Main"))).toBe(true);
    expect(await lastAssistant().textContent()).toContain("edited");
    expect(await lastAssistant().getByTestId("branch-nav").textContent()).toMatch(/3\/3/);

    await lastAssistant().getByRole("button", { name: "Copy text" }).click();
    await expect.poll(() => lastAssistant().getByRole("button", { name: "Copy text" }).textContent()).toBe("Copied");
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(markdown);
    await shot("chat-markdown");
  });

  it("imports an exported chat (all versions, models and settings), and neutralises hostile markup in it", async () => {
    // Export the versions chat from the page.
    const download = page.waitForEvent("download");
    await page.getByRole("button", { name: "Export .json" }).click();
    const exported = readFileSync(await (await download).path(), "utf8");
    const file = JSON.parse(exported) as { format: string; messages: { id: string; role: string; content: string; model: string | null; parentId: string | null }[]; activeLeafId: string };
    expect(file.format).toBe("guild.chat/1");
    expect(file.messages).toHaveLength(6);
    // One more branch, written by a hostile "model": a script, an event handler, a javascript: link.
    const hostile = "<script>window.__pwned = 1</script>\n\n<img src=x onerror=\"window.__pwned = 2\">\n\n[click me](javascript:window.__pwned=3) and [fine](https://example.org)";
    const root = file.messages.find((m) => m.parentId === null)!;
    file.messages.push({ ...file.messages.find((m) => m.role === "assistant")!, id: "hostile", parentId: root.id, content: hostile, model: "evil.gguf" });
    file.activeLeafId = "hostile";
    (file as unknown as { conversation: { title: string } }).conversation.title = "Imported chat";
    const upload = path.join(served.dataDir, "exported-chat.json");
    writeFileSync(upload, JSON.stringify(file));
    await page.getByTestId("import-file").setInputFiles(upload);
    await expect.poll(() => page.locator(".thread-head h2").textContent()).toBe("Imported chat");
    const reply = lastAssistant();
    await expect.poll(() => reply.getByTestId("message-model").textContent()).toBe("evil.gguf");
    expect(await reply.getByTestId("branch-nav").textContent()).toMatch(/4\/4/);
    expect(await reply.locator(".markdown").textContent()).toContain("<script>window.__pwned = 1</script>");
    expect(await reply.locator(".markdown script, .markdown img, .markdown [onerror]").count()).toBe(0);
    expect(await reply.locator(".markdown a").evaluateAll((as) => as.map((a) => a.getAttribute("href")))).toEqual(["https://example.org"]);
    await reply.getByText("click me").click();
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    // The rest of the tree came along: the first versions, with their models.
    await reply.getByRole("button", { name: "Previous version" }).click();
    await expect.poll(() => reply.getByTestId("branch-nav").textContent()).toMatch(/3\/4/);
    expect(await reply.getByTestId("message-model").textContent()).toBe("guild-demo-qwen3moe-Q8_0.gguf");
    const imported = (await contract().chat.listConversations()).find((c) => c.title === "Imported chat")!;
    const tree = JSON.parse((await contract().chat.exportConversation({ id: imported.id, format: "json" })).content) as typeof file;
    expect(tree.messages.map((m) => [m.role, m.content, m.model])).toEqual(file.messages.map((m) => [m.role, m.content, m.model]));
    // A file that is not an export is refused with words, and nothing is added.
    const count = (await contract().chat.listConversations()).length;
    const bad = path.join(served.dataDir, "bad-chat.json");
    writeFileSync(bad, JSON.stringify({ ...file, messages: [{ ...file.messages[0]!, role: "system" }] }));
    await page.getByTestId("import-file").setInputFiles(bad);
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/bad-chat\.json: messages\[0\]\.role must be "user" or "assistant"/);
    expect((await contract().chat.listConversations()).length).toBe(count);
    await shot("chat-imported");
    expect(pageErrors).toEqual([]);
  });
});
