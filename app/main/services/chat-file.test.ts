// The exported chat file: a tree written by chatFileOf reads back the same
// (round trip through the store), and a file that is not one is refused with
// one line naming the problem, before anything is stored.
import { describe, expect, it } from "vitest";

import { checkSettings, defaultGenerationSettings } from "../../shared/chat-settings.js";
import { chatFileLimits, chatFileOf, readChatFile } from "./chat-file.js";
import { ConversationStore } from "./conversation-store.js";

const bytes = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));

function exported() {
  const s = new ConversationStore(":memory:");
  const c = s.createConversation({ title: "Rivers", settings: { ...defaultGenerationSettings, temperature: 0.2, seed: 7 } });
  const q = s.addMessage({ conversationId: c.id, parentId: null, role: "user", content: "What does river mean?", status: "complete" });
  const a = s.addMessage({ conversationId: c.id, parentId: q.id, role: "assistant", content: "A stream.", status: "complete", model: "demo.gguf" });
  s.finishMessage(a.id, "A stream.", "complete", { promptTokens: 12, generatedTokens: 3, tokensPerSecond: 50, ttftMs: 4, queueMs: 0, stopReason: "eos", contextSize: 512 }, null);
  const b = s.addMessage({ conversationId: c.id, parentId: q.id, role: "assistant", content: "Water, <b>moving</b>.", status: "complete", model: "demo.gguf", edited: true });
  s.activate(c.id, a.id);
  return { s, c, file: chatFileOf(s.getConversation(c.id)!, s.tree(c.id), s.activeLeaf(c.id)), ids: { q, a, b } };
}

describe("chat files", () => {
  it("round-trip: the imported chat has the same tree, active path, models and settings under new ids", () => {
    const { s, c, file, ids } = exported();
    const imported = s.importConversation(readChatFile(bytes(file)));
    expect(imported.id).not.toBe(c.id);
    expect(imported).toMatchObject({ title: "Rivers", createdAt: c.createdAt, settings: c.settings });
    const path = s.messages(imported.id);
    expect(path.map((m) => [m.role, m.content, m.model, m.siblingIds.length])).toEqual([
      ["user", "What does river mean?", null, 1], ["assistant", "A stream.", "demo.gguf", 2],
    ]);
    expect(path.every((m) => m.id !== ids.q.id && m.id !== ids.a.id)).toBe(true);
    expect(path[1]!.stats).toEqual({ promptTokens: 12, generatedTokens: 3, tokensPerSecond: 50, ttftMs: 4, queueMs: 0, stopReason: "eos", contextSize: 512 });
    const other = s.getMessage(path[1]!.siblingIds[1]!)!;
    expect(other).toMatchObject({ content: "Water, <b>moving</b>.", edited: true });
    // Exporting the import gives the same file but for ids and times.
    const again = chatFileOf(s.getConversation(imported.id)!, s.tree(imported.id), s.activeLeaf(imported.id));
    const shape = (f: typeof file) => f.messages.map((m) => [f.messages.findIndex((x) => x.id === m.parentId), m.role, m.content, m.model, m.edited, m.stats]);
    expect(shape(again)).toEqual(shape(file));
    expect(again.messages.findIndex((m) => m.id === again.activeLeafId)).toBe(file.messages.findIndex((m) => m.id === file.activeLeafId));
    s.close();
  });

  it("refuses what is not a chat file, naming the problem", () => {
    const { file } = exported();
    const m0 = file.messages[0]!;
    const cases: [unknown, RegExp][] = [
      ["\xff\xfe", /not JSON/],
      ["[1,2", /not JSON/],
      [[], /the file must be an object/],
      [{ ...file, format: "guild.chat/2" }, /format must be "guild.chat\/1"/],
      [{ ...file, extra: 1 }, /the file has an unknown field "extra"/],
      [JSON.stringify(file).replace('"format"', '"__proto__":{},"format"'), /unknown field "__proto__"/],
      [{ ...file, conversation: { ...file.conversation, title: "x".repeat(201) } }, /conversation\.title is longer than 200/],
      [{ ...file, conversation: { ...file.conversation, settings: { temperature: 9 } } }, /conversation\.settings: temperature must be a number from 0 to 2/],
      [{ ...file, conversation: { ...file.conversation, settings: { evil: true } } }, /unknown setting "evil"/],
      [{ ...file, messages: "no" }, /messages must be a list/],
      [{ ...file, messages: [{ ...m0, role: "system" }] }, /messages\[0\]\.role must be "user" or "assistant"/],
      [{ ...file, messages: [{ ...m0, parentId: "later" }, { ...m0, id: "later", parentId: null }] }, /messages\[0\]\.parentId names no earlier message/],
      [{ ...file, messages: [m0, m0] }, /messages\[1\]\.id .* is used twice/],
      [{ ...file, messages: [{ ...m0, content: 5 }] }, /messages\[0\]\.content must be a string/],
      [{ ...file, messages: [{ ...m0, content: "x".repeat(chatFileLimits.contentChars + 1) }] }, /content is longer than 1000000/],
      [{ ...file, messages: [{ ...m0, createdAt: "yesterday" }] }, /createdAt must be a time/],
      [{ ...file, messages: [{ ...m0, onclick: "x" }] }, /messages\[0\] has an unknown field "onclick"/],
      [{ ...file, messages: [{ ...file.messages[1]!, parentId: null, stats: { ...file.messages[1]!.stats, stopReason: "why" } }] }, /stats\.stopReason must be one of/],
      [{ ...file, messages: [{ ...file.messages[1]!, parentId: null, stats: { ...file.messages[1]!.stats, promptTokens: -1 } }] }, /stats\.promptTokens must be a whole number/],
      [{ ...file, activeLeafId: "nope" }, /activeLeafId names no message/],
      [{ ...file, messages: Array.from({ length: chatFileLimits.messages + 1 }, () => 0) }, /more than 10000 messages/],
    ];
    for (const [input, problem] of cases) expect(() => readChatFile(bytes(input)), String(problem)).toThrow(problem);
  });

  it("carries a reply's speculative-decoding stats through export and import, and checks them", () => {
    const { s, file } = exported();
    const drafted = { promptTokens: 12, generatedTokens: 32, tokensPerSecond: 50, ttftMs: 4, queueMs: 0, stopReason: "length", contextSize: 512,
      draftTokens: 79, acceptedDraftTokens: 4, windows: 28, drafter: "mtp" } as const;
    const withDrafts = { ...file, messages: file.messages.map((m, i) => (i === 1 ? { ...m, stats: drafted } : m)) };
    const imported = s.importConversation(readChatFile(bytes(withDrafts)));
    expect(s.messages(imported.id)[1]!.stats).toEqual(drafted);
    const reply = withDrafts.messages[1]!;
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ draftTokens: 3 }, /stats must have all of draftTokens, acceptedDraftTokens, windows, drafter or none of them/],
      [{ drafter: "eagle" }, /stats\.drafter must be "mtp" or "none"/],
      [{ acceptedDraftTokens: 80 }, /stats\.acceptedDraftTokens must not exceed draftTokens/],
      [{ windows: 2.5 }, /stats\.windows must be a whole number/],
      [{ draftTokens: -1 }, /stats\.draftTokens must be a whole number/],
    ];
    for (const [change, problem] of bad) {
      const stats = change["draftTokens"] === 3 ? { ...file.messages[1]!.stats, draftTokens: 3 } : { ...drafted, ...change };
      expect(() => readChatFile(bytes({ ...withDrafts, messages: [{ ...reply, parentId: null, stats }] })), String(problem)).toThrow(problem);
    }
    s.close();
  });

  it("keeps a reply exported while streaming as stopped, and takes the last message as the leaf when none is named", () => {
    const { file } = exported();
    const chat = readChatFile(bytes({ ...file, activeLeafId: undefined, messages: file.messages.map((m, i) => (i === 2 ? { ...m, status: "streaming" } : m)) }));
    expect(chat.messages[2]!.status).toBe("stopped");
    expect(chat.activeLeaf).toBe(2);
  });
});

describe("checkSettings", () => {
  it("accepts known fields in range and names the first bad one", () => {
    expect(checkSettings({ temperature: 0, seed: null, maxTokens: 4096, overflow: "stop" })).toEqual({
      ok: true, settings: { temperature: 0, seed: null, maxTokens: 4096, overflow: "stop" },
    });
    expect(checkSettings({ topK: 1.5 })).toEqual({ ok: false, problem: "topK must be a whole number from 0 to 2147483647" });
    expect(checkSettings({ topP: 0 })).toMatchObject({ ok: false, problem: /topP must be a number from 0.000001 to 1|topP must be a number from 1e-6 to 1/ });
    expect(checkSettings({ maxTokens: 0 })).toMatchObject({ ok: false, problem: "maxTokens must be a whole number from 1 to 2147483647 (or empty)" });
    expect(checkSettings({ repeatPenalty: Number.NaN })).toMatchObject({ ok: false });
    expect(checkSettings({ overflow: "wrap" })).toEqual({ ok: false, problem: 'overflow must be "shift" or "stop"' });
    expect(checkSettings({ systemPrompt: 1 })).toEqual({ ok: false, problem: "systemPrompt must be a string" });
    expect(checkSettings(null)).toEqual({ ok: false, problem: "settings must be an object" });
  });
});
