// ConversationStore's message tree (versions as siblings, the active path,
// switching branches), its presets, and the versioned migration of a
// database written before the tree existed (schema version 0).
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";

import { defaultGenerationSettings } from "../../shared/chat-settings.js";
import { openChatDatabaseStrict } from "./chat-database.js";
import { chatSchemaVersion } from "./chat-migrations.js";
import { ConversationStore } from "./conversation-store.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "guild-tree-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the message tree", () => {
  it("keeps every version as a sibling and shows the active path", () => {
    const s = new ConversationStore(":memory:");
    const c = s.createConversation({});
    const add = (parentId: string | null, role: "user" | "assistant", content: string) =>
      s.addMessage({ conversationId: c.id, parentId, role, content, status: "complete", model: role === "assistant" ? "m.gguf" : null });
    const q1 = add(null, "user", "q1");
    const a1 = add(q1.id, "assistant", "a1");
    const q2 = add(a1.id, "user", "q2");
    const a2 = add(q2.id, "assistant", "a2");
    expect(s.messages(c.id).map((m) => m.content)).toEqual(["q1", "a1", "q2", "a2"]);
    expect(s.messages(c.id)[1]).toMatchObject({ model: "m.gguf", parentId: q1.id, siblingIds: [a1.id], edited: false });

    // A regenerated first reply: a sibling of a1, now the end of the path.
    const a1b = add(q1.id, "assistant", "a1b");
    expect(a1b.siblingIds).toEqual([a1.id, a1b.id]);
    expect(s.messages(c.id).map((m) => m.content)).toEqual(["q1", "a1b"]);
    // An edited first question: a second root.
    const q1b = s.addMessage({ conversationId: c.id, parentId: null, role: "user", content: "q1b", status: "complete", edited: true });
    expect(s.messages(c.id).map((m) => [m.content, m.siblingIds.length, m.edited])).toEqual([["q1b", 2, true]]);

    // Back to the first question: its newest branch (a1b) comes back; a1's branch keeps q2, a2.
    expect(s.activate(c.id, q1.id)).toBe(a1b.id);
    expect(s.messages(c.id).map((m) => m.content)).toEqual(["q1", "a1b"]);
    expect(s.activate(c.id, a1.id)).toBe(a2.id);
    expect(s.messages(c.id).map((m) => m.content)).toEqual(["q1", "a1", "q2", "a2"]);
    expect(s.messages(c.id)[0]!.siblingIds).toEqual([q1.id, q1b.id]);
    // A message of another conversation is not activated.
    const other = s.createConversation({});
    expect(s.activate(other.id, a1.id)).toBeNull();
    expect(s.tree(c.id).map((m) => m.content)).toEqual(["q1", "a1", "q2", "a2", "a1b", "q1b"]);
    expect(s.pathTo(q2.id).map((m) => m.content)).toEqual(["q1", "a1", "q2"]);
    s.close();
  });

  it("survives a reopen: the active path and sibling order are in the database", () => {
    const file = path.join(dir, "reopen.sqlite");
    const s1 = new ConversationStore(file);
    const c = s1.createConversation({ settings: { ...defaultGenerationSettings, temperature: 0, maxTokens: 64, overflow: "stop" } });
    const q = s1.addMessage({ conversationId: c.id, parentId: null, role: "user", content: "q", status: "complete" });
    const a = s1.addMessage({ conversationId: c.id, parentId: q.id, role: "assistant", content: "a", status: "complete" });
    const b = s1.addMessage({ conversationId: c.id, parentId: q.id, role: "assistant", content: "b", status: "complete" });
    s1.activate(c.id, a.id);
    s1.setContextFrom(a.id, q.id);
    s1.close();
    const s2 = new ConversationStore(file);
    expect(s2.messages(c.id).map((m) => [m.content, m.siblingIds, m.contextFrom])).toEqual([["q", [q.id], null], ["a", [a.id, b.id], q.id]]);
    expect(s2.getConversation(c.id)!.settings).toMatchObject({ temperature: 0, maxTokens: 64, overflow: "stop", topK: 40 });
    s2.close();
  });

  it("saves user presets by name (a second save replaces the first)", () => {
    const s = new ConversationStore(":memory:");
    const p = s.savePreset("Mine", { temperature: 0.1 });
    expect(s.savePreset("Mine", { temperature: 0.3, systemPrompt: "x" }).id).toBe(p.id);
    expect(s.listPresets()).toEqual([{ id: p.id, name: "Mine", builtIn: false, settings: { temperature: 0.3, systemPrompt: "x" } }]);
    expect(s.deletePreset(p.id)).toBe(true);
    expect(s.listPresets()).toEqual([]);
    s.close();
  });
});

describe("the schema migration", () => {
  /** A database as the version before the tree wrote it (chat-database.ts's schema, user_version 0). */
  function version0(file: string): void {
    const db = openChatDatabaseStrict(file);  // creates the version 0 tables
    expect(db.pragma("user_version", { simple: true })).toBe(0);
    db.prepare("INSERT INTO conversations VALUES ('c1', 'Old chat', 'Be terse.', 0.3, '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:05.000Z')").run();
    const add = db.prepare("INSERT INTO messages (id, conversation_id, role, content, status, created_at, stats) VALUES (?, 'c1', ?, ?, 'complete', '2025-01-01T00:00:01.000Z', ?)");
    add.run("m1", "user", "hello", null);
    add.run("m2", "assistant", "hi", JSON.stringify({ promptTokens: 10, generatedTokens: 2, tokensPerSecond: 5, ttftMs: 1, queueMs: 0, stopReason: "eos" }));
    add.run("m3", "user", "again", null);
    db.close();
  }

  it("turns a flat history into one branch and the old settings into the chat's settings", () => {
    const file = path.join(dir, "v0.sqlite");
    version0(file);
    const s = new ConversationStore(file);
    const c = s.getConversation("c1")!;
    expect(c.settings).toEqual({ ...defaultGenerationSettings, systemPrompt: "Be terse.", temperature: 0.3 });
    expect(s.messages("c1").map((m) => [m.id, m.parentId, m.siblingIds])).toEqual([["m1", null, ["m1"]], ["m2", "m1", ["m2"]], ["m3", "m2", ["m3"]]]);
    expect(s.getMessage("m2")!.stats).toMatchObject({ stopReason: "eos", contextSize: 0 });
    // The migrated chat grows as a tree.
    const m4 = s.addMessage({ conversationId: "c1", parentId: "m2", role: "user", content: "other", status: "complete" });
    expect(m4.siblingIds).toEqual(["m3", m4.id]);
    s.close();
    const db = new Database(file);
    expect(db.pragma("user_version", { simple: true })).toBe(chatSchemaVersion);
    expect((db.prepare("PRAGMA table_info(conversations)").all() as { name: string }[]).map((r) => r.name))
      .toEqual(["id", "title", "created_at", "updated_at", "settings", "active_leaf_id"]);
    db.close();
  });

  it("leaves a database of a newer Guild untouched and runs in memory instead", () => {
    const file = path.join(dir, "future.sqlite");
    version0(file);
    const db = new Database(file);
    db.pragma("user_version = 99");
    db.close();
    expect(() => new ConversationStore(file)).toThrow(/written by a newer Guild \(schema version 99/);
    const { store, outcome } = ConversationStore.openResilient(file);
    expect(outcome).toMatchObject({ kind: "memory", movedTo: null, reason: expect.stringMatching(/newer Guild/) });
    expect(store.inMemory).toBe(true);
    store.close();
    const again = new Database(file);
    expect(again.pragma("user_version", { simple: true })).toBe(99);
    expect(again.prepare("SELECT count(*) AS n FROM messages").get()).toEqual({ n: 3 });
    again.close();
  });
});
