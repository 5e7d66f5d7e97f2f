// ConversationStore: conversations and messages in SQLite (better-sqlite3, in
// the app data folder). Synchronous and small; ChatService drives it. How the
// database is opened (and what happens to a bad one) is chat-database.ts.
import { randomUUID } from "node:crypto";

import type Database from "better-sqlite3";

import type { Conversation, Message, MessageStats, MessageStatus, SearchHit } from "../../shared/app-contract.js";
import { openChatDatabase, openChatDatabaseStrict, type ChatDatabaseOutcome } from "./chat-database.js";

export const defaultSystemPrompt = "You are a helpful assistant.";
export const defaultTemperature = 0.7;

interface ConversationRow {
  id: string; title: string; system_prompt: string; temperature: number; created_at: string; updated_at: string;
}
interface MessageRow {
  id: string; conversation_id: string; role: "user" | "assistant"; content: string; status: MessageStatus;
  created_at: string; stats: string | null; error: string | null; seq: number;
}

export class ConversationStore {
  private readonly db: Database.Database;

  /**
   * `source`: a database path or ":memory:" (opened strictly: any problem
   * throws), or a database chat-database.ts has opened and prepared.
   */
  constructor(source: string | Database.Database) {
    this.db = typeof source === "string" ? openChatDatabaseStrict(source) : source;
  }

  /** Opens the app's database at `file`, replacing a bad one (chat-database.ts); never throws. */
  static openResilient(file: string): { store: ConversationStore; outcome: ChatDatabaseOutcome } {
    const { db, outcome } = openChatDatabase(file);
    return { store: new ConversationStore(db), outcome };
  }

  /** True when nothing is saved on disk (":memory:", or the fallback after a bad database). */
  get inMemory(): boolean {
    return this.db.memory;
  }

  close(): void {
    this.db.close();
  }

  listConversations(): Conversation[] {
    return (this.db.prepare("SELECT * FROM conversations ORDER BY updated_at DESC, rowid DESC").all() as ConversationRow[]).map(toConversation);
  }

  getConversation(id: string): Conversation | null {
    const row = this.db.prepare("SELECT * FROM conversations WHERE id = ?").get(id) as ConversationRow | undefined;
    return row ? toConversation(row) : null;
  }

  createConversation(init: { title?: string | undefined; systemPrompt?: string | undefined; temperature?: number | undefined }): Conversation {
    const now = new Date().toISOString();
    const c: Conversation = {
      id: randomUUID(),
      title: init.title?.trim() || "New chat",
      systemPrompt: init.systemPrompt ?? defaultSystemPrompt,
      temperature: init.temperature ?? defaultTemperature,
      createdAt: now,
      updatedAt: now,
    };
    this.db.prepare("INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?)")
      .run(c.id, c.title, c.systemPrompt, c.temperature, c.createdAt, c.updatedAt);
    return c;
  }

  updateConversation(id: string, change: { title?: string; systemPrompt?: string; temperature?: number }): Conversation | null {
    const c = this.getConversation(id);
    if (!c) return null;
    const next = { ...c, ...change, updatedAt: new Date().toISOString() };
    this.db.prepare("UPDATE conversations SET title = ?, system_prompt = ?, temperature = ?, updated_at = ? WHERE id = ?")
      .run(next.title, next.systemPrompt, next.temperature, next.updatedAt, id);
    return next;
  }

  deleteConversation(id: string): boolean {
    return this.db.prepare("DELETE FROM conversations WHERE id = ?").run(id).changes > 0;
  }

  /** Conversations whose title or any message contains `query` (case-insensitive), newest first. */
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

  messages(conversationId: string): Message[] {
    return (this.db.prepare("SELECT * FROM messages WHERE conversation_id = ? ORDER BY seq").all(conversationId) as MessageRow[]).map(toMessage);
  }

  getMessage(id: string): Message | null {
    const row = this.db.prepare("SELECT * FROM messages WHERE id = ?").get(id) as MessageRow | undefined;
    return row ? toMessage(row) : null;
  }

  addMessage(conversationId: string, role: Message["role"], content: string, status: MessageStatus): Message {
    const m: Message = {
      id: randomUUID(), conversationId, role, content, status, createdAt: new Date().toISOString(), stats: null, error: null,
    };
    this.db.transaction(() => {
      this.db.prepare("INSERT INTO messages (id, conversation_id, role, content, status, created_at) VALUES (?, ?, ?, ?, ?, ?)")
        .run(m.id, conversationId, role, content, status, m.createdAt);
      this.db.prepare("UPDATE conversations SET updated_at = ? WHERE id = ?").run(m.createdAt, conversationId);
    })();
    return m;
  }

  /** Saves a reply's text so far (called as it grows: every few tokens, chat-service.ts). */
  saveContent(id: string, content: string): void {
    this.db.prepare("UPDATE messages SET content = ? WHERE id = ?").run(content, id);
  }

  finishMessage(id: string, content: string, status: MessageStatus, stats: MessageStats | null, error: string | null): Message | null {
    this.db.prepare("UPDATE messages SET content = ?, status = ?, stats = ?, error = ? WHERE id = ?")
      .run(content, status, stats ? JSON.stringify(stats) : null, error, id);
    return this.getMessage(id);
  }

  /**
   * Edit-and-resend: sets a message's text and deletes every later message of
   * its conversation, in one transaction. Returns the edited message, or null
   * when there is no such message.
   */
  rewriteAndTruncate(id: string, content: string): Message | null {
    const row = this.db.prepare("SELECT * FROM messages WHERE id = ?").get(id) as MessageRow | undefined;
    if (!row) return null;
    this.db.transaction(() => {
      this.db.prepare("UPDATE messages SET content = ? WHERE id = ?").run(content, id);
      this.db.prepare("DELETE FROM messages WHERE conversation_id = ? AND seq > ?").run(row.conversation_id, row.seq);
      this.db.prepare("UPDATE conversations SET updated_at = ? WHERE id = ?").run(new Date().toISOString(), row.conversation_id);
    })();
    return this.getMessage(id);
  }

  deleteMessage(id: string): boolean {
    return this.db.prepare("DELETE FROM messages WHERE id = ?").run(id).changes > 0;
  }
}

function toConversation(r: ConversationRow): Conversation {
  return { id: r.id, title: r.title, systemPrompt: r.system_prompt, temperature: r.temperature, createdAt: r.created_at, updatedAt: r.updated_at };
}

function toMessage(r: MessageRow): Message {
  return {
    id: r.id, conversationId: r.conversation_id, role: r.role, content: r.content, status: r.status,
    createdAt: r.created_at, stats: r.stats ? (JSON.parse(r.stats) as MessageStats) : null, error: r.error,
  };
}

function snippetAround(text: string, query: string): string {
  const i = text.toLowerCase().indexOf(query.toLowerCase());
  const start = Math.max(0, i - 30);
  const s = text.slice(start, start + 90).replace(/\s+/g, " ");
  return (start > 0 ? "…" : "") + s + (start + 90 < text.length ? "…" : "");
}
