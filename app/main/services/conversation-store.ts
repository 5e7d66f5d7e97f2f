// ConversationStore: conversations and their message trees in SQLite
// (better-sqlite3, in the app data folder). Synchronous and small; ChatService
// drives it. How the database is opened (and what happens to a bad one) is
// chat-database.ts; its schema versions are chat-migrations.ts.
//
// Messages form a tree per conversation: each has a parent (null for the
// first) and a sibling index among the versions of its turn. Nothing is
// deleted but whole conversations: an edit or a regeneration adds a sibling.
// The conversation's active leaf names the path the chat shows.
import { randomUUID } from "node:crypto";

import type Database from "better-sqlite3";

import type { Conversation, Message, MessageStats, MessageStatus, SearchHit } from "../../shared/app-contract.js";
import { checkSettings, defaultGenerationSettings, withSettings, type GenerationSettings, type Preset } from "../../shared/chat-settings.js";
import { openChatDatabase, openChatDatabaseStrict, type ChatDatabaseOutcome } from "./chat-database.js";
import { migrateChatDatabase } from "./chat-migrations.js";

interface ConversationRow {
  id: string; title: string; settings: string; active_leaf_id: string | null; created_at: string; updated_at: string;
}
interface MessageRow {
  id: string; conversation_id: string; role: "user" | "assistant"; content: string; status: MessageStatus;
  created_at: string; stats: string | null; error: string | null; seq: number;
  parent_id: string | null; sibling_index: number; model: string | null; edited: number; context_from: string | null;
}
interface PresetRow { id: string; name: string; settings: string; created_at: string }

export interface NewMessage {
  conversationId: string;
  parentId: string | null;
  role: Message["role"];
  content: string;
  status: MessageStatus;
  model?: string | null;
  edited?: boolean;
}

/** A message of an imported tree: `parent` is the index of an earlier entry (chat-import.ts checked it). */
export interface ImportedMessage {
  parent: number | null;
  role: Message["role"];
  content: string;
  status: Exclude<MessageStatus, "streaming">;
  createdAt: string;
  stats: MessageStats | null;
  error: string | null;
  model: string | null;
  edited: boolean;
}

export interface ImportedChat {
  title: string;
  createdAt: string;
  settings: GenerationSettings;
  messages: ImportedMessage[];
  /** Index of the active leaf in `messages`, or null for an empty chat. */
  activeLeaf: number | null;
}

export class ConversationStore {
  private readonly db: Database.Database;

  /**
   * `source`: a database path or ":memory:" (opened strictly: any problem
   * throws), or a database chat-database.ts has opened and prepared. Either
   * is brought up to the current schema (chat-migrations.ts) first.
   */
  constructor(source: string | Database.Database) {
    this.db = typeof source === "string" ? openChatDatabaseStrict(source) : source;
    try {
      migrateChatDatabase(this.db);
    } catch (err) {
      if (typeof source === "string") this.db.close();
      throw err;
    }
  }

  /**
   * Opens the app's database at `file`, replacing a bad one (chat-database.ts);
   * never throws. A database that cannot be upgraded (written by a newer Guild,
   * or a failed step) is left as it is and the chat runs in memory.
   */
  static openResilient(file: string): { store: ConversationStore; outcome: ChatDatabaseOutcome } {
    const { db, outcome } = openChatDatabase(file);
    try {
      return { store: new ConversationStore(db), outcome };
    } catch (err) {
      db.close();
      const reason = err instanceof Error ? err.message : String(err);
      return { store: new ConversationStore(":memory:"), outcome: { kind: "memory", reason, movedTo: null } };
    }
  }

  /** True when nothing is saved on disk (":memory:", or the fallback after a bad database). */
  get inMemory(): boolean {
    return this.db.memory;
  }

  close(): void {
    this.db.close();
  }

  // ------------------------------------------------------------ conversations

  listConversations(): Conversation[] {
    return (this.db.prepare("SELECT * FROM conversations ORDER BY updated_at DESC, rowid DESC").all() as ConversationRow[]).map(toConversation);
  }

  getConversation(id: string): Conversation | null {
    const row = this.db.prepare("SELECT * FROM conversations WHERE id = ?").get(id) as ConversationRow | undefined;
    return row ? toConversation(row) : null;
  }

  createConversation(init: { title?: string | undefined; settings?: GenerationSettings | undefined }): Conversation {
    const now = new Date().toISOString();
    const c: Conversation = {
      id: randomUUID(),
      title: init.title?.trim() || "New chat",
      settings: init.settings ?? defaultGenerationSettings,
      createdAt: now,
      updatedAt: now,
    };
    this.db.prepare("INSERT INTO conversations (id, title, settings, active_leaf_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?)")
      .run(c.id, c.title, JSON.stringify(c.settings), c.createdAt, c.updatedAt);
    return c;
  }

  updateConversation(id: string, change: { title?: string; settings?: GenerationSettings }): Conversation | null {
    const c = this.getConversation(id);
    if (!c) return null;
    const next = { ...c, ...change, updatedAt: new Date().toISOString() };
    this.db.prepare("UPDATE conversations SET title = ?, settings = ?, updated_at = ? WHERE id = ?")
      .run(next.title, JSON.stringify(next.settings), next.updatedAt, id);
    return next;
  }

  deleteConversation(id: string): boolean {
    return this.db.prepare("DELETE FROM conversations WHERE id = ?").run(id).changes > 0;
  }

  /** Conversations whose title or any message (of any branch) contains `query` (case-insensitive), newest first. */
  search(query: string): SearchHit[] {
    const q = query.trim();
    if (q.length === 0) return this.listConversations().map((conversation) => ({ conversation, snippet: "" }));
    const like = "%" + q.replace(/[\\%_]/g, (m) => "\\" + m) + "%";
    const rows = this.db.prepare(`
      SELECT c.*, (SELECT m.content FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE @like ESCAPE '\\' ORDER BY m.seq LIMIT 1) AS hit
      FROM conversations c
      WHERE c.title LIKE @like ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE @like ESCAPE '\\')
      ORDER BY c.updated_at DESC`).all({ like }) as (ConversationRow & { hit: string | null })[];
    return rows.map((r) => ({ conversation: toConversation(r), snippet: snippetAround(r.hit ?? r.title, q) }));
  }

  // ------------------------------------------------------------ the message tree

  /** The active path: from the first message to the conversation's active leaf. */
  messages(conversationId: string): Message[] {
    const leaf = (this.db.prepare("SELECT active_leaf_id FROM conversations WHERE id = ?").get(conversationId) as
      { active_leaf_id: string | null } | undefined)?.active_leaf_id;
    return leaf ? this.pathTo(leaf) : [];
  }

  /** The path from the first message to `id` (inclusive), or [] when there is no such message. */
  pathTo(id: string): Message[] {
    const rows = this.db.prepare(`
      WITH RECURSIVE up(id, depth) AS (
        SELECT id, 0 FROM messages WHERE id = ?
        UNION ALL SELECT m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = up.id WHERE m.parent_id IS NOT NULL)
      SELECT messages.* FROM up JOIN messages USING (id) ORDER BY up.depth DESC`).all(id) as MessageRow[];
    if (rows.length === 0) return [];
    const siblings = this.siblingMap(rows[0]!.conversation_id);
    return rows.map((r) => toMessage(r, siblings));
  }

  /** Every message of a conversation (all branches), in the order they were made. */
  tree(conversationId: string): Message[] {
    const rows = this.db.prepare("SELECT * FROM messages WHERE conversation_id = ? ORDER BY seq").all(conversationId) as MessageRow[];
    const siblings = this.siblingMap(conversationId);
    return rows.map((r) => toMessage(r, siblings));
  }

  /** The conversation's active leaf, or null when it has no message. */
  activeLeaf(conversationId: string): string | null {
    return (this.db.prepare("SELECT active_leaf_id FROM conversations WHERE id = ?").get(conversationId) as
      { active_leaf_id: string | null } | undefined)?.active_leaf_id ?? null;
  }

  getMessage(id: string): Message | null {
    const row = this.db.prepare("SELECT * FROM messages WHERE id = ?").get(id) as MessageRow | undefined;
    return row ? toMessage(row, this.siblingMap(row.conversation_id, row.parent_id)) : null;
  }

  /**
   * Adds a message as the newest child of `parentId` (a new version of its turn
   * when it has children already) and makes it the active leaf.
   */
  addMessage(m: NewMessage): Message {
    const id = randomUUID();
    const createdAt = new Date().toISOString();
    this.db.transaction(() => {
      const { n } = this.db.prepare("SELECT count(*) AS n FROM messages WHERE conversation_id = ? AND parent_id IS ?")
        .get(m.conversationId, m.parentId) as { n: number };
      this.db.prepare(`INSERT INTO messages (id, conversation_id, role, content, status, created_at, parent_id, sibling_index, model, edited)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
        .run(id, m.conversationId, m.role, m.content, m.status, createdAt, m.parentId, n, m.model ?? null, m.edited ? 1 : 0);
      this.db.prepare("UPDATE conversations SET active_leaf_id = ?, updated_at = ? WHERE id = ?").run(id, createdAt, m.conversationId);
    })();
    return this.getMessage(id)!;
  }

  /**
   * Makes `messageId` part of the active path, with the newest message of its
   * subtree as the leaf (the branch under it as it was last extended). Returns
   * the leaf, or null when the message is not in the conversation.
   */
  activate(conversationId: string, messageId: string): string | null {
    const leaf = this.db.prepare(`
      WITH RECURSIVE down(id) AS (
        SELECT id FROM messages WHERE id = ? AND conversation_id = ?
        UNION ALL SELECT m.id FROM messages m JOIN down ON m.parent_id = down.id)
      SELECT messages.id FROM down JOIN messages USING (id) ORDER BY messages.seq DESC LIMIT 1`).get(messageId, conversationId) as
      { id: string } | undefined;
    if (!leaf) return null;
    this.db.prepare("UPDATE conversations SET active_leaf_id = ? WHERE id = ?").run(leaf.id, conversationId);
    return leaf.id;
  }

  /** Saves a reply's text so far (called as it grows: every few tokens, chat-service.ts). */
  saveContent(id: string, content: string): void {
    this.db.prepare("UPDATE messages SET content = ? WHERE id = ?").run(content, id);
  }

  /** Records which message a reply's prompt began with (context shift); null = the whole path. */
  setContextFrom(id: string, fromId: string | null): void {
    this.db.prepare("UPDATE messages SET context_from = ? WHERE id = ?").run(fromId, id);
  }

  finishMessage(id: string, content: string, status: MessageStatus, stats: MessageStats | null, error: string | null): Message | null {
    this.db.prepare("UPDATE messages SET content = ?, status = ?, stats = ?, error = ? WHERE id = ?")
      .run(content, status, stats ? JSON.stringify(stats) : null, error, id);
    return this.getMessage(id);
  }

  /** Stores an imported chat (chat-import.ts checked it) under new ids, in one transaction. */
  importConversation(chat: ImportedChat): Conversation {
    const c: Conversation = {
      id: randomUUID(), title: chat.title, settings: chat.settings, createdAt: chat.createdAt, updatedAt: new Date().toISOString(),
    };
    const ids = chat.messages.map(() => randomUUID());
    this.db.transaction(() => {
      this.db.prepare("INSERT INTO conversations (id, title, settings, active_leaf_id, created_at, updated_at) VALUES (?, ?, ?, NULL, ?, ?)")
        .run(c.id, c.title, JSON.stringify(c.settings), c.createdAt, c.updatedAt);
      const insert = this.db.prepare(`INSERT INTO messages
        (id, conversation_id, role, content, status, created_at, stats, error, parent_id, sibling_index, model, edited)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
      const children = new Map<number | null, number>();
      chat.messages.forEach((m, i) => {
        const index = children.get(m.parent) ?? 0;
        children.set(m.parent, index + 1);
        insert.run(ids[i], c.id, m.role, m.content, m.status, m.createdAt, m.stats ? JSON.stringify(m.stats) : null, m.error,
          m.parent === null ? null : ids[m.parent], index, m.model, m.edited ? 1 : 0);
      });
      if (chat.activeLeaf !== null) this.db.prepare("UPDATE conversations SET active_leaf_id = ? WHERE id = ?").run(ids[chat.activeLeaf], c.id);
    })();
    return c;
  }

  // ------------------------------------------------------------ presets

  listPresets(): Preset[] {
    return (this.db.prepare("SELECT * FROM presets ORDER BY created_at, rowid").all() as PresetRow[]).map(toPreset);
  }

  /** Saves a user preset; one with the same name is replaced (keeping its id). */
  savePreset(name: string, settings: Partial<GenerationSettings>): Preset {
    const existing = this.db.prepare("SELECT * FROM presets WHERE name = ?").get(name) as PresetRow | undefined;
    const id = existing?.id ?? "user:" + randomUUID();
    if (existing) this.db.prepare("UPDATE presets SET settings = ? WHERE id = ?").run(JSON.stringify(settings), id);
    else this.db.prepare("INSERT INTO presets VALUES (?, ?, ?, ?)").run(id, name, JSON.stringify(settings), new Date().toISOString());
    return { id, name, builtIn: false, settings };
  }

  deletePreset(id: string): boolean {
    return this.db.prepare("DELETE FROM presets WHERE id = ?").run(id).changes > 0;
  }

  /** parent id → its children's ids in sibling order (one conversation, or only the children of `parentId`). */
  private siblingMap(conversationId: string, parentId?: string | null): Map<string | null, string[]> {
    const rows = (parentId === undefined
      ? this.db.prepare("SELECT id, parent_id FROM messages WHERE conversation_id = ? ORDER BY sibling_index, seq").all(conversationId)
      : this.db.prepare("SELECT id, parent_id FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY sibling_index, seq")
        .all(conversationId, parentId)) as { id: string; parent_id: string | null }[];
    const map = new Map<string | null, string[]>();
    for (const r of rows) {
      const list = map.get(r.parent_id);
      if (list) list.push(r.id);
      else map.set(r.parent_id, [r.id]);
    }
    return map;
  }
}

/** Settings as stored: checked again on the way out (a hand-edited database cannot smuggle values in), over the defaults. */
function storedSettings(json: string): GenerationSettings {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return defaultGenerationSettings;
  }
  const checked = checkSettings(parsed);
  return withSettings(defaultGenerationSettings, checked.ok ? checked.settings : {});
}

function toConversation(r: ConversationRow): Conversation {
  return { id: r.id, title: r.title, settings: storedSettings(r.settings), createdAt: r.created_at, updatedAt: r.updated_at };
}

function toMessage(r: MessageRow, siblings: Map<string | null, string[]>): Message {
  return {
    id: r.id, conversationId: r.conversation_id, role: r.role, content: r.content, status: r.status,
    createdAt: r.created_at, stats: r.stats ? readStats(r.stats) : null, error: r.error,
    parentId: r.parent_id, siblingIds: siblings.get(r.parent_id) ?? [r.id], model: r.model, edited: r.edited !== 0,
    contextFrom: r.context_from,
  };
}

/** Stats saved before contextSize existed read as 0 (unknown). */
function readStats(json: string): MessageStats {
  const s = JSON.parse(json) as MessageStats;
  return { ...s, contextSize: typeof s.contextSize === "number" ? s.contextSize : 0 };
}

function toPreset(r: PresetRow): Preset {
  const checked = checkSettings(JSON.parse(r.settings));
  return { id: r.id, name: r.name, builtIn: false, settings: checked.ok ? checked.settings : {} };
}

function snippetAround(text: string, query: string): string {
  const i = text.toLowerCase().indexOf(query.toLowerCase());
  const start = Math.max(0, i - 30);
  const s = text.slice(start, start + 90).replace(/\s+/g, " ");
  return (start > 0 ? "…" : "") + s + (start + 90 < text.length ? "…" : "");
}
