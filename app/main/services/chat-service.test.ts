// ChatService on the real runtime and the embedded demo model (context 512):
// long chats keep answering by shifting the context, the "stop" policy ends a
// full chat with stop reason "context" and a summary to carry on from, replies
// are not capped by the app (max tokens up to the context), versions form a
// tree, and an exported chat imports back.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { ChatReplyEvent, Message } from "../../shared/app-contract.js";
import { embeddedModelPath } from "../paths.js";
import { replyReserve } from "./context-window.js";
import { createAppServices, type AppServices } from "./index.js";

describe("chat service (real runtime)", () => {
  let dir: string;
  let app: AppServices;
  const chat = () => app.contract.chat;
  const done = (messageId: string) => new Promise<Message>((resolve) => {
    const off = app.subscribe((name, p) => {
      const e = p as ChatReplyEvent;
      if (name === "chat.reply" && e.kind === "done" && e.messageId === messageId) { off(); resolve(e.message); }
    });
  });
  const say = async (conversationId: string, content: string) => {
    const r = await chat().send({ conversationId, content });
    return done(r.assistantMessage.id);
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-chat-"));
    app = createAppServices({ dataDir: dir, packagesDir: path.join(dir, "packages"), loadDefaults: { threads: 2 } });
    await app.ready;
  });
  afterAll(async () => {
    await app.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps answering a 40-turn chat by dropping its oldest turns from the prompt (never from the database)", async () => {
    const model = (await app.contract.models.current())!;
    expect(model.contextSize).toBe(512);
    const c = await chat().createConversation({ settings: { temperature: 0, maxTokens: 24 } });
    const words = ["river", "happy", "abandon", "light", "stone", "music", "garden", "winter"];
    let shifted: Message | null = null;
    for (let turn = 0; turn < 40; turn++) {
      const reply = await say(c.id, `Turn ${turn}: what does ${words[turn % words.length]} mean?`);
      expect(reply.status, `turn ${turn}: ${reply.error}`).toBe("complete");
      expect(reply.stats!.generatedTokens).toBeGreaterThan(0);
      expect(reply.stats!.contextSize).toBe(512);
      // The prompt always leaves the reply its room.
      expect(reply.stats!.promptTokens + replyReserve(512, 24)).toBeLessThanOrEqual(512);
      if (reply.contextFrom !== null) shifted ??= reply;
    }
    expect(shifted, "no reply shifted the context").not.toBeNull();
    const saved = await chat().messages({ conversationId: c.id });
    expect(saved).toHaveLength(80);
    expect(saved[0]!.content).toBe("Turn 0: what does river mean?");
    // The last reply saw a suffix of the chat that starts with one of your messages.
    const last = saved.at(-1)!;
    const from = saved.findIndex((m) => m.id === last.contextFrom);
    expect(from).toBeGreaterThan(0);
    expect(saved[from]!.role).toBe("user");
    expect(last.model).toBe("guild-demo-qwen3moe-Q8_0.gguf");
  });

  it("policy stop: a full chat's reply ends at once with stop reason context; the model summarizes the chat", async () => {
    const c = await chat().createConversation({ settings: { temperature: 0, maxTokens: 24, overflow: "stop" } });
    let reply: Message | undefined;
    for (let turn = 0; turn < 40; turn++) {
      reply = await say(c.id, `Turn ${turn}: what does river mean?`);
      if (reply.status === "error") break;
      expect(reply.stats!.stopReason).not.toBe("context");
    }
    expect(reply!.status).toBe("error");
    expect(reply!.stats).toMatchObject({ stopReason: "context", generatedTokens: 0, contextSize: 512 });
    expect(reply!.error).toMatch(/^This chat is full: its \d+ tokens and room for a reply \(24\) do not fit in the model's context of 512 tokens\. Start a new chat that carries a summary/);
    const { summary } = await chat().summarize({ conversationId: c.id });
    expect(summary.length).toBeGreaterThan(0);
    // Switched to context shift, the same chat answers again.
    await chat().updateSettings({ id: c.id, settings: { overflow: "shift" } });
    const again = await chat().regenerate({ conversationId: c.id });
    expect((await done(again.assistantMessage.id)).status).toBe("complete");
  });

  it("has no reply cap of its own: with max tokens unset a reply runs past 512 tokens, up to the context", async () => {
    // A context of 1024 tokens (the demo model was trained on 512), and settings under which the demo
    // model never says its end-of-turn token: no system prompt, greedy, and a repeat penalty below 1 make it loop.
    await app.contract.models.load({ path: embeddedModelPath(), settings: { threads: 2, contextSize: 1024 } });
    const c = await chat().createConversation({ settings: { systemPrompt: "", temperature: 0, repeatPenalty: 0.5 } });
    const reply = await say(c.id, "What does river mean?");
    expect(reply.status).toBe("complete");
    expect(reply.stats!.generatedTokens).toBeGreaterThan(512);
    expect(reply.stats).toMatchObject({ stopReason: "context", contextSize: 1024 });
    // (the last token is sampled from the last position and never needs a slot of its own)
    expect(reply.stats!.promptTokens + reply.stats!.generatedTokens).toBeLessThanOrEqual(1024 + 1);
    // A max tokens setting is the reply's cap (stop reason "length").
    await chat().updateSettings({ id: c.id, settings: { maxTokens: 40 } });
    const capped = await done((await chat().regenerate({ conversationId: c.id })).assistantMessage.id);
    expect(capped.stats).toMatchObject({ generatedTokens: 40, stopReason: "length" });
    await app.contract.models.load({ path: embeddedModelPath(), settings: { threads: 2 } });
  });

  it("keeps versions: regenerate, edit-and-resend and a hand edit add siblings; switching flips the path", async () => {
    const c = await chat().createConversation({ settings: { temperature: 0 } });
    const first = await say(c.id, "What does river mean?");
    const regen = await chat().regenerate({ conversationId: c.id, messageId: first.id });
    const second = await done(regen.assistantMessage.id);
    expect(second.siblingIds).toEqual([first.id, second.id]);
    expect(second.content).toBe(first.content);  // greedy: the same words

    const edited = await chat().editMessage({ conversationId: c.id, messageId: second.id, content: "A **flowing** stream." });
    expect(edited).toMatchObject({ edited: true, model: second.model, siblingIds: [first.id, second.id, edited.id], stats: null });
    const question = (await chat().messages({ conversationId: c.id }))[0]!;
    const resent = await chat().editAndResend({ conversationId: c.id, messageId: question.id, content: "What does happy mean?" });
    await done(resent.assistantMessage.id);
    let pathNow = await chat().messages({ conversationId: c.id });
    expect(pathNow.map((m) => m.content)).toEqual(["What does happy mean?", expect.any(String)]);
    expect(pathNow[0]!.siblingIds).toEqual([question.id, resent.userMessage!.id]);

    // Back to the first question: its newest branch is the hand-edited reply.
    pathNow = await chat().switchBranch({ conversationId: c.id, messageId: question.id });
    expect(pathNow.map((m) => m.id)).toEqual([question.id, edited.id]);
    pathNow = await chat().switchBranch({ conversationId: c.id, messageId: first.id });
    expect(pathNow.map((m) => m.id)).toEqual([question.id, first.id]);
    // Only replies are regenerated; ids of other chats are refused.
    await expect(chat().regenerate({ conversationId: c.id, messageId: question.id })).rejects.toThrow(/only a reply can be regenerated/);
    const other = await chat().createConversation({});
    await expect(chat().switchBranch({ conversationId: other.id, messageId: first.id })).rejects.toThrow(/no message with id/);

    // The export has the whole tree and the model of each reply; it imports back as a new chat.
    const json = await chat().exportConversation({ id: c.id, format: "json" });
    const file = JSON.parse(json.content) as { format: string; messages: { model: string | null }[] };
    expect(file.format).toBe("guild.chat/1");
    expect(file.messages).toHaveLength(6);
    expect(file.messages.filter((m) => m.model === "guild-demo-qwen3moe-Q8_0.gguf")).toHaveLength(4);
    const md = await chat().exportConversation({ id: c.id, format: "markdown" });
    expect(md.content).toContain("## Assistant (guild-demo-qwen3moe-Q8_0.gguf)");
    const imported = await chat().importConversation({ fileName: json.filename, data: Buffer.from(json.content).toString("base64") });
    const back = await chat().messages({ conversationId: imported.id });
    expect(back.map((m) => [m.role, m.content, m.model, m.siblingIds.length])).toEqual(pathNow.map((m) => [m.role, m.content, m.model, m.siblingIds.length]));
    await expect(chat().importConversation({ fileName: "x.json", data: Buffer.from("{}").toString("base64") }))
      .rejects.toThrow(/^x\.json: not a Guild chat export/);
  });

  it("keeps the chat's settings, checks them, and saves user presets", async () => {
    const c = await chat().createConversation({ settings: { temperature: 0.4, seed: 11 } });
    expect(c.settings).toMatchObject({ temperature: 0.4, seed: 11, topK: 40, maxTokens: null, overflow: "shift" });
    const u = await chat().updateSettings({ id: c.id, settings: { topP: 0.5, systemPrompt: "Short answers." } });
    expect(u.settings).toMatchObject({ temperature: 0.4, topP: 0.5, systemPrompt: "Short answers." });
    await expect(chat().updateSettings({ id: c.id, settings: { minP: 2 } })).rejects.toThrow("minP must be a number from 0 to 1");
    await expect(chat().createConversation({ settings: { bogus: 1 } as never })).rejects.toThrow('unknown setting "bogus"');
    const p = await chat().savePreset({ name: "Terse", settings: { temperature: 0.1, systemPrompt: "Short answers." } });
    expect((await chat().listPresets()).map((x) => x.name)).toEqual(["Balanced", "Precise", "Creative", "Terse"]);
    await expect(chat().savePreset({ name: "precise", settings: {} })).rejects.toThrow(/built-in preset/);
    await expect(chat().deletePreset({ id: "builtin:balanced" })).rejects.toThrow(/cannot be deleted/);
    expect(await chat().deletePreset({ id: p.id })).toEqual({ deleted: true });
  });
});
