// The app's services against a real SQLite database, the real runtime and the
// embedded model: conversations, streamed and persisted replies, stop,
// regenerate, export, profiles, inspect.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { loadCancelledMessage, type AppEvents, type ChatReplyEvent, type EventName, type Message } from "../../shared/app-contract.js";
import { LOAD_STAGES } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import { ConversationStore } from "./conversation-store.js";
import { createAppServices, type AppServices } from "./index.js";
import { estimateMemory } from "./model-library.js";
import { PackageService } from "./package-service.js";
import { parseProfile } from "./profile-store.js";
import { RuntimeHost } from "./runtime-host.js";

describe("ConversationStore", () => {
  it("keeps conversations and messages, searches them, and cascades deletes", () => {
    const s = new ConversationStore(":memory:");
    const a = s.createConversation({ title: "Rivers" });
    const b = s.createConversation({});
    s.addMessage({ conversationId: b.id, parentId: null, role: "user", content: "What is 100% of a lake_side?", status: "complete" });
    const m = s.addMessage({ conversationId: b.id, parentId: null, role: "assistant", content: "", status: "streaming" });
    s.saveContent(m.id, "partial");
    expect(s.getMessage(m.id)).toMatchObject({ content: "partial", status: "streaming" });
    expect(s.search("rivers").map((h) => h.conversation.id)).toEqual([a.id]);
    expect(s.search("100%").map((h) => h.conversation.id)).toEqual([b.id]);
    expect(s.search("lake_s")[0]!.snippet).toContain("lake_side");
    expect(s.search("%")).toHaveLength(1);  // LIKE wildcards are escaped
    expect(s.deleteConversation(b.id)).toBe(true);
    expect(s.messages(b.id)).toEqual([]);
    s.close();
  });

  it("marks a reply that was streaming at shutdown as stopped", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "guild-store-"));
    const file = path.join(dir, "c.sqlite");
    const s1 = new ConversationStore(file);
    const c = s1.createConversation({});
    const m = s1.addMessage({ conversationId: c.id, parentId: null, role: "assistant", content: "half a rep", status: "streaming" });
    s1.close();
    const s2 = new ConversationStore(file);
    expect(s2.getMessage(m.id)).toMatchObject({ content: "half a rep", status: "stopped" });
    s2.close();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe("estimateMemory", () => {
  it("splits weights into experts and dense, and sizes one session's KV cache", () => {
    const e = estimateMemory({
      tensorBytes: 1000, params: 1000, layers: 2, experts: 4, embedding: 4, expertFf: 5,
      headsKv: 2, keyLength: 8, valueLength: 8, contextSize: 100,
    });
    expect(e.expertBytes).toBe(2 * 4 * 3 * 4 * 5);
    expect(e.denseBytes).toBe(1000 - 480);
    expect(e.kvCacheBytes).toBe(2 * 100 * 2 * 16 * 2);
    expect(e.totalBytes).toBe(e.denseBytes + e.expertBytes + e.kvCacheBytes);
  });
});

describe("parseProfile", () => {
  it("accepts a profile or a `guild run --json` profile event, and refuses others", () => {
    const p = { schema: "guild.startup-profile/1", model: {}, machine: {}, stages: [{ name: "a", start_ms: 0, end_ms: 1, duration_ms: 1 }], fallbacks: [], placement: {}, total_ms: 1 };
    expect(parseProfile(JSON.stringify(p)).stages[0]).toMatchObject({ bytes: 0, detail: {} });
    expect(parseProfile(JSON.stringify({ event: "profile", profile: p })).total_ms).toBe(1);
    expect(() => parseProfile("{")).toThrow("not a startup profile JSON (parse error at byte 1)");
    expect(() => parseProfile(JSON.stringify({ ...p, schema: "x" }))).toThrow(/not a Guild startup profile/);
  });
});

describe("app services (real runtime)", () => {
  let dir: string;
  let app: AppServices;
  const events: { name: EventName; payload: unknown }[] = [];
  const replies = () => events.filter((e) => e.name === "chat.reply").map((e) => e.payload as ChatReplyEvent);
  const doneFor = (messageId: string) => new Promise<AppEvents["chat.reply"] & { kind: "done" }>((resolve) => {
    const off = app.subscribe((name, p) => {
      const r = p as ChatReplyEvent;
      if (name === "chat.reply" && r.kind === "done" && r.messageId === messageId) { off(); resolve(r); }
    });
  });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-app-"));
    app = createAppServices({ dataDir: dir, packagesDir: path.join(dir, "packages"), loadDefaults: { threads: 2 }, chat: { saveIntervalMs: 50 } });
    app.subscribe((name, payload) => events.push({ name, payload }));
    await app.ready;
  });
  afterAll(async () => {
    await app.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("loads the embedded model on start, with progress naming each stage, and records its profile", async () => {
    const current = await app.contract.models.current();
    expect(current).toMatchObject({ architecture: "qwen3moe", ready: true });
    const stages = events.filter((e) => e.name === "model.progress").map((e) => (e.payload as { stage: string; stageIndex: number }));
    expect(stages.slice(0, 14).map((s) => s.stage)).toEqual([...LOAD_STAGES]);
    expect(stages.slice(0, 14).map((s) => s.stageIndex)).toEqual(LOAD_STAGES.map((_, i) => i + 1));
    const recent = await app.contract.profiles.recent();
    expect(recent).toHaveLength(1);
    const profile = await app.contract.profiles.get({ id: recent[0]!.id });
    expect(profile.stages.map((s) => s.name)).toEqual([...LOAD_STAGES]);
    // A path opens only inside the profile folder (the UI sends a picked file's text instead).
    const file = path.join(dir, "profiles", "saved.json");
    writeFileSync(file, JSON.stringify(profile));
    expect((await app.contract.profiles.open({ path: file })).total_ms).toBe(profile.total_ms);
    writeFileSync(path.join(dir, "elsewhere.json"), JSON.stringify(profile));
    await expect(app.contract.profiles.open({ path: path.join(dir, "elsewhere.json") })).rejects.toThrow(/reads only files in the profile folder/);
  });

  it("streams a reply, saves it, and titles the conversation after the first message", async () => {
    const c = await app.contract.chat.createConversation({ settings: { temperature: 0 } });
    const r = await app.contract.chat.send({ conversationId: c.id, content: "Hello! Who are you?" });
    expect(r.assistantMessage.status).toBe("streaming");
    const done = await doneFor(r.assistantMessage.id);
    const deltas = replies().filter((e) => e.kind === "delta" && e.messageId === r.assistantMessage.id).map((e) => (e as { text: string }).text);
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join("")).toBe(done.message.content);
    expect(done.message).toMatchObject({ status: "complete", stats: { stopReason: expect.stringMatching(/eos|length/) } });
    expect(done.message.stats!.generatedTokens).toBeGreaterThan(0);
    const saved = await app.contract.chat.messages({ conversationId: c.id });
    expect(saved.map((m) => [m.role, m.status])).toEqual([["user", "complete"], ["assistant", "complete"]]);
    expect(saved[1]!.content).toBe(done.message.content);
    expect((await app.contract.chat.listConversations()).find((x) => x.id === c.id)!.title).toBe("Hello! Who are you?");

    // Regenerate makes a new version of the reply (temperature 0: the same text); the path still has two messages.
    const again = await app.contract.chat.regenerate({ conversationId: c.id });
    const done2 = await doneFor(again.assistantMessage.id);
    expect(done2.message.content).toBe(done.message.content);
    expect(await app.contract.chat.messages({ conversationId: c.id })).toHaveLength(2);

    const md = await app.contract.chat.exportConversation({ id: c.id, format: "markdown" });
    expect(md.filename).toBe("Hello-Who-are-you.md");
    expect(md.content).toContain("## Assistant");
    // The JSON has the whole tree: the question and both versions of the reply.
    const json = JSON.parse((await app.contract.chat.exportConversation({ id: c.id, format: "json" })).content) as { messages: unknown[] };
    expect(json.messages).toHaveLength(3);
  });

  it("stops a reply, keeps what it had, and refuses a second send meanwhile", async () => {
    // The demo model's replies are short: stop at the first token, and retry
    // in the rare case that the reply ended before the stop arrived.
    let last: Message | undefined;
    for (let attempt = 0; attempt < 3 && last?.status !== "stopped"; attempt++) {
      const c = await app.contract.chat.createConversation({ settings: { temperature: 2 } });
      let stopped: Promise<{ stopped: boolean }> | undefined;
      const off = app.subscribe((name, p) => {
        const e = p as ChatReplyEvent;
        if (name === "chat.reply" && e.kind === "delta" && e.conversationId === c.id && !stopped) stopped = app.contract.chat.stop({ conversationId: c.id });
      });
      const r = await app.contract.chat.send({ conversationId: c.id, content: "Tell me a long story about the sea." });
      await expect(app.contract.chat.send({ conversationId: c.id, content: "again" })).rejects.toThrow(/already replying/);
      last = (await doneFor(r.assistantMessage.id)).message;
      off();
      await stopped;
    }
    expect(last?.status).toBe("stopped");
    expect(last?.stats?.stopReason).toBe("cancel");
    expect(last?.content.length).toBeGreaterThan(0);
  });

  it("edit-and-resend makes a new version of a user message (the old one stays a branch) and replies again", async () => {
    const c = await app.contract.chat.createConversation({ settings: { temperature: 0 } });
    const first = await app.contract.chat.send({ conversationId: c.id, content: "What does river mean?" });
    await doneFor(first.assistantMessage.id);
    const second = await app.contract.chat.send({ conversationId: c.id, content: "Thanks!" });
    await doneFor(second.assistantMessage.id);
    expect(await app.contract.chat.messages({ conversationId: c.id })).toHaveLength(4);

    // Editing an assistant message, a message of another conversation, or to nothing is refused.
    await expect(app.contract.chat.editAndResend({ conversationId: c.id, messageId: first.assistantMessage.id, content: "x" }))
      .rejects.toThrow(/only your own messages/);
    const other = await app.contract.chat.createConversation({});
    await expect(app.contract.chat.editAndResend({ conversationId: other.id, messageId: first.userMessage!.id, content: "x" }))
      .rejects.toThrow(/no message with id/);
    await expect(app.contract.chat.editAndResend({ conversationId: c.id, messageId: first.userMessage!.id, content: "  " }))
      .rejects.toThrow(/empty/);

    const edited = await app.contract.chat.editAndResend({ conversationId: c.id, messageId: first.userMessage!.id, content: "What does happy mean?" });
    expect(edited.userMessage).toMatchObject({ content: "What does happy mean?", siblingIds: [first.userMessage!.id, edited.userMessage!.id] });
    // A second edit while the reply runs is refused, like a second send.
    await expect(app.contract.chat.editAndResend({ conversationId: c.id, messageId: first.userMessage!.id, content: "again" }))
      .rejects.toThrow(/already replying/);
    const done = await doneFor(edited.assistantMessage.id);
    expect(done.message.status).toBe("complete");
    const saved = await app.contract.chat.messages({ conversationId: c.id });
    expect(saved.map((m) => [m.id, m.role, m.content])).toEqual([
      [edited.userMessage!.id, "user", "What does happy mean?"],
      [edited.assistantMessage.id, "assistant", done.message.content],
    ]);
    expect((await app.contract.chat.listConversations()).find((x) => x.id === c.id)!.title).toBe("What does happy mean?");
    // The new reply answers the edited question: the same text as a fresh conversation asking it (temperature 0).
    const fresh = await app.contract.chat.createConversation({ settings: { temperature: 0 } });
    const freshReply = await app.contract.chat.send({ conversationId: fresh.id, content: "What does happy mean?" });
    expect((await doneFor(freshReply.assistantMessage.id)).message.content).toBe(done.message.content);
  });

  it("regenerates after a stopped reply, and stop on an idle conversation says so", async () => {
    const c = await app.contract.chat.createConversation({ settings: { temperature: 0 } });
    expect(await app.contract.chat.stop({ conversationId: c.id })).toEqual({ stopped: false });
    await expect(app.contract.chat.regenerate({ conversationId: c.id })).rejects.toThrow(/nothing to regenerate/);
    const r = await app.contract.chat.send({ conversationId: c.id, content: "What does river mean?" });
    expect(await app.contract.chat.stop({ conversationId: c.id })).toEqual({ stopped: true });
    expect((await doneFor(r.assistantMessage.id)).message.status).toBe("stopped");
    const again = await app.contract.chat.regenerate({ conversationId: c.id });
    expect(again.userMessage).toBeNull();
    const done = await doneFor(again.assistantMessage.id);
    expect(done.message.status).toBe("complete");
    expect((await app.contract.chat.messages({ conversationId: c.id })).map((m) => m.id))
      .toEqual([r.userMessage!.id, again.assistantMessage.id]);
  });

  it("validates requests: empty messages, unknown conversations, bad temperatures", async () => {
    const c = await app.contract.chat.createConversation({});
    await expect(app.contract.chat.send({ conversationId: c.id, content: "   " })).rejects.toThrow(/empty/);
    await expect(app.contract.chat.messages({ conversationId: "nope" })).rejects.toThrow(/no conversation/);
    await expect(app.contract.chat.updateSettings({ id: c.id, settings: { systemPrompt: "", temperature: 5 } })).rejects.toThrow(/temperature/);
    await expect(app.contract.chat.renameConversation({ id: c.id, title: " " })).rejects.toThrow(/empty/);
    expect((await app.contract.chat.renameConversation({ id: c.id, title: "Named" })).title).toBe("Named");
    expect(await app.contract.chat.deleteConversation({ id: c.id })).toEqual({ deleted: true });
  });

  it("lists and inspects model files with a memory estimate; an empty packages folder lists only the bundled packages", async () => {
    const files = await app.contract.models.list();
    expect(files[0]).toMatchObject({ source: "embedded", path: embeddedModelPath() });
    const s = await app.contract.models.inspect({ path: embeddedModelPath() });
    expect(s).toMatchObject({ architecture: "qwen3moe", experts: 16, expertsPerToken: 2, layers: 6 });
    expect(s.memory.expertBytes).toBeGreaterThan(s.memory.denseBytes);
    expect(s.memory.kvCacheBytes).toBeGreaterThan(0);
    await expect(app.contract.models.inspect({ path: path.join(dir, "missing.gguf") })).rejects.toThrow();
    // Nothing installed in the app's folder: the runtime's bundled packages (docs/PACKAGES.md), which the model loaded from.
    const bundled = new Set((await new PackageService({ dir: path.join(dir, "packages") }).list().then((l) => (l.ok ? l.value.packages : [])))
      .filter((p) => p.source === "bundled").map((p) => p.name));
    expect(bundled.has("cpu-generic")).toBe(true);
    expect((await app.contract.packages.list()).map((p) => p.name).every((name) => bundled.has(name))).toBe(true);
    await expect(app.contract.packages.disable({ name: "cpu-nope" })).rejects.toThrow(/no package named cpu-nope/);
  });

  it("keeps the current model when asked to load a file that is not a model", async () => {
    const bad = path.join(dir, "not-a-model.gguf");
    writeFileSync(bad, "hello");
    await expect(app.contract.models.load({ path: bad })).rejects.toThrow(/cannot load/);
    expect(await app.contract.models.current()).toMatchObject({ ready: true, architecture: "qwen3moe" });
    expect(events.at(-1)).toMatchObject({ name: "model.state", payload: { kind: "failed" } });
  });

  it("cancels a load while the file is being checked: the current model stays", async () => {
    const before = await app.contract.models.current();
    const load = app.contract.models.load({ path: embeddedModelPath(), settings: { threads: 2 } });
    expect(await app.contract.models.cancelLoad()).toEqual({ cancelled: true });
    await expect(load).rejects.toThrow(loadCancelledMessage);
    expect((await app.contract.models.current())?.id).toBe(before!.id);
    expect(events.at(-1)).toMatchObject({ name: "model.state", payload: { kind: "cancelled", path: embeddedModelPath() } });
    expect(await app.contract.models.cancelLoad()).toEqual({ cancelled: false });
  });

  it("cancels a load midway through its stages, from the first progress event: the current model stays", async () => {
    const before = await app.contract.models.current();
    const stages: string[] = [];
    const off = app.subscribe((name, p) => {
      if (name !== "model.progress") return;
      stages.push((p as { stage: string }).stage);
      if (stages.length === 1) void app.contract.models.cancelLoad();
    });
    await expect(app.contract.models.load({ path: embeddedModelPath(), settings: { threads: 2 } })).rejects.toThrow(loadCancelledMessage);
    off();
    expect(stages.length).toBeGreaterThan(0);  // (the native load may have run through its stages meanwhile: it is dropped)
    // It loaded next to the current model (memory holds both), which therefore stays.
    expect((await app.contract.models.current())?.id).toBe(before!.id);
    expect(app.host.listModels().map((m) => m.id)).toEqual([before!.id]);
    expect(events.at(-1)).toMatchObject({ name: "model.state", payload: { kind: "cancelled" } });
    // The next load works.
    await app.contract.models.load({ path: embeddedModelPath(), settings: { threads: 2 } });
    expect(await app.contract.models.current()).toMatchObject({ ready: true });
  });

  it("unloads, then refuses to chat until a model is loaded again", async () => {
    expect(await app.contract.models.unload()).toEqual({ unloaded: true });
    const c = await app.contract.chat.createConversation({});
    await expect(app.contract.chat.send({ conversationId: c.id, content: "hi" })).rejects.toThrow(/no model is loaded/);
    await app.contract.models.load({ path: embeddedModelPath(), settings: { threads: 2 } });
    expect((await app.contract.profiles.recent()).length).toBe(3);  // the start-up load, the reload after a cancel, this one
  });
});

describe("app services over a host that already holds a model (guild serve --model)", () => {
  it("adopts that model instead of loading the embedded one", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "guild-adopt-"));
    const host = new RuntimeHost();
    const loaded = await host.loadModel(embeddedModelPath(), { threads: 2 });
    const app = createAppServices({ dataDir: dir, host, packagesDir: path.join(dir, "packages") });
    await app.ready;
    expect((await app.contract.models.current())?.id).toBe(loaded.id);
    expect(host.listModels()).toHaveLength(1);
    expect(await app.contract.profiles.recent()).toHaveLength(1);
    await app.dispose();
    expect(host.listModels()).toHaveLength(0);  // dispose unloads the app's current model; the host stays usable
    await host.dispose();
    rmSync(dir, { recursive: true, force: true });
  });
});
