// ChatService: conversations (ConversationStore) + replies (RuntimeHost, on the
// model that ModelManager holds). A reply streams as `chat.reply` events and is
// saved as it grows: every 16 tokens or 250 ms, whichever comes first, so a
// crash loses at most the last few tokens (the demo model streams a whole
// reply in about 0.2 s: a time-only throttle of a second would lose all of it).
import { randomUUID } from "node:crypto";

import type {
  ChatService, Conversation, EventSink, ExportedFile, Message, MessageStats, SearchHit, SendReply,
} from "../../shared/app-contract.js";
import type { ChatMessage, RequestId } from "../../shared/runtime-contract.js";
import type { ConversationStore } from "./conversation-store.js";
import type { ModelManager } from "./model-manager.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";

export interface ChatServiceOptions {
  /** The longest a streamed token waits before the reply is written to the database. Defaults to {@link defaultSaveIntervalMs}. */
  saveIntervalMs?: number;
  /** A growing reply is written at least every this many tokens. Defaults to {@link defaultSaveEveryTokens}. */
  saveEveryTokens?: number;
  /** Most tokens per reply. Defaults to {@link defaultMaxReplyTokens}. */
  maxReplyTokens?: number;
}
export const defaultSaveIntervalMs = 250 satisfies NonNullable<ChatServiceOptions["saveIntervalMs"]>;
export const defaultSaveEveryTokens = 16 satisfies NonNullable<ChatServiceOptions["saveEveryTokens"]>;
export const defaultMaxReplyTokens = 512 satisfies NonNullable<ChatServiceOptions["maxReplyTokens"]>;

interface ActiveReply {
  requestId: RequestId;
  messageId: string;
}

export class ChatServiceImpl implements ChatService {
  private readonly active = new Map<string, ActiveReply>();  // conversationId → reply
  private readonly saveIntervalMs: number;
  private readonly saveEveryTokens: number;
  private readonly maxReplyTokens: number;

  constructor(
    private readonly store: ConversationStore,
    private readonly host: RuntimeHost,
    private readonly models: ModelManager,
    private readonly emit: EventSink,
    options: ChatServiceOptions = {},
  ) {
    this.saveIntervalMs = options.saveIntervalMs ?? defaultSaveIntervalMs;
    this.saveEveryTokens = Math.max(1, options.saveEveryTokens ?? defaultSaveEveryTokens);
    this.maxReplyTokens = options.maxReplyTokens ?? defaultMaxReplyTokens;
  }

  async listConversations(): Promise<Conversation[]> {
    return this.store.listConversations();
  }

  async createConversation(req: { title?: string; systemPrompt?: string; temperature?: number }): Promise<Conversation> {
    if (req.temperature !== undefined) checkTemperature(req.temperature);
    return this.store.createConversation(req);
  }

  async renameConversation(req: { id: string; title: string }): Promise<Conversation> {
    const title = req.title.trim();
    if (title.length === 0) throw new RuntimeError("a title cannot be empty", "invalid");
    return this.found(this.store.updateConversation(req.id, { title: title.slice(0, 200) }), req.id);
  }

  async updateSettings(req: { id: string; systemPrompt: string; temperature: number }): Promise<Conversation> {
    checkTemperature(req.temperature);
    return this.found(this.store.updateConversation(req.id, { systemPrompt: req.systemPrompt, temperature: req.temperature }), req.id);
  }

  async deleteConversation(req: { id: string }): Promise<{ deleted: boolean }> {
    await this.stop({ conversationId: req.id });
    return { deleted: this.store.deleteConversation(req.id) };
  }

  async searchConversations(req: { query: string }): Promise<SearchHit[]> {
    return this.store.search(req.query);
  }

  async messages(req: { conversationId: string }): Promise<Message[]> {
    this.found(this.store.getConversation(req.conversationId), req.conversationId);
    return this.store.messages(req.conversationId);
  }

  async send(req: { conversationId: string; content: string }): Promise<SendReply> {
    const conversation = this.found(this.store.getConversation(req.conversationId), req.conversationId);
    const content = req.content.trim();
    if (content.length === 0) throw new RuntimeError("the message is empty", "invalid");
    this.checkIdle(conversation.id);
    const model = this.models.requireCurrent();
    const first = this.store.messages(conversation.id).length === 0;
    const userMessage = this.store.addMessage(conversation.id, "user", content, "complete");
    if (first && conversation.title === "New chat") this.store.updateConversation(conversation.id, { title: autoTitle(content) });
    const assistantMessage = this.startReply(conversation, model.id);
    return { userMessage, assistantMessage };
  }

  async regenerate(req: { conversationId: string }): Promise<SendReply> {
    const conversation = this.found(this.store.getConversation(req.conversationId), req.conversationId);
    this.checkIdle(conversation.id);
    const model = this.models.requireCurrent();
    const history = this.store.messages(conversation.id);
    const last = history.at(-1);
    if (!last) throw new RuntimeError("there is nothing to regenerate", "invalid");
    if (last.role === "assistant") this.store.deleteMessage(last.id);
    const assistantMessage = this.startReply(conversation, model.id);
    return { userMessage: null, assistantMessage };
  }

  async editAndResend(req: { conversationId: string; messageId: string; content: string }): Promise<SendReply> {
    const conversation = this.found(this.store.getConversation(req.conversationId), req.conversationId);
    const content = req.content.trim();
    if (content.length === 0) throw new RuntimeError("the message is empty", "invalid");
    const target = this.store.getMessage(req.messageId);
    if (!target || target.conversationId !== conversation.id)
      throw new RuntimeError(`no message with id ${req.messageId} in this conversation`, "not_found");
    if (target.role !== "user") throw new RuntimeError("only your own messages can be edited", "invalid");
    this.checkIdle(conversation.id);
    const model = this.models.requireCurrent();
    const wasFirst = this.store.messages(conversation.id)[0]?.id === target.id;
    const userMessage = this.store.rewriteAndTruncate(target.id, content);
    if (!userMessage) throw new RuntimeError(`no message with id ${req.messageId} in this conversation`, "not_found");
    // A title made from the first message follows its edit; one the user gave stays.
    if (wasFirst && conversation.title === autoTitle(target.content)) this.store.updateConversation(conversation.id, { title: autoTitle(content) });
    const assistantMessage = this.startReply(conversation, model.id);
    return { userMessage, assistantMessage };
  }

  async stop(req: { conversationId: string }): Promise<{ stopped: boolean }> {
    const a = this.active.get(req.conversationId);
    if (!a) return { stopped: false };
    return { stopped: this.host.cancel(a.requestId) };
  }

  async exportConversation(req: { id: string; format: "markdown" | "json" }): Promise<ExportedFile> {
    const c = this.found(this.store.getConversation(req.id), req.id);
    const messages = this.store.messages(c.id);
    const base = c.title.replace(/[^\p{L}\p{N}._-]+/gu, "-").replace(/^-+|-+$/g, "").slice(0, 60) || "conversation";
    if (req.format === "json") {
      return { filename: base + ".json", mimeType: "application/json", content: JSON.stringify({ conversation: c, messages }, null, 2) + "\n" };
    }
    const lines = [`# ${c.title}`, "", `_System prompt:_ ${c.systemPrompt || "(none)"}  `, `_Temperature:_ ${c.temperature}`, ""];
    for (const m of messages) {
      lines.push(`## ${m.role === "user" ? "User" : "Assistant"}`, "", m.content, "");
      if (m.stats) lines.push(`_${m.stats.generatedTokens} tokens, ${m.stats.tokensPerSecond.toFixed(1)} tok/s, TTFT ${m.stats.ttftMs.toFixed(0)} ms_`, "");
    }
    return { filename: base + ".md", mimeType: "text/markdown", content: lines.join("\n") };
  }

  /** Cancels every reply (shutdown). */
  async dispose(): Promise<void> {
    for (const a of this.active.values()) this.host.cancel(a.requestId);
  }

  private startReply(conversation: Conversation, modelId: string): Message {
    const history: ChatMessage[] = [];
    if (conversation.systemPrompt.trim()) history.push({ role: "system", content: conversation.systemPrompt });
    for (const m of this.store.messages(conversation.id)) {
      if (m.content.length > 0) history.push({ role: m.role, content: m.content });
    }
    const message = this.store.addMessage(conversation.id, "assistant", "", "streaming");
    const requestId = randomUUID();
    const reply: ActiveReply = { requestId, messageId: message.id };
    this.active.set(conversation.id, reply);
    const ids = { conversationId: conversation.id, messageId: message.id };

    let text = "";
    let unsaved = 0;  // tokens since the last save
    let saveTimer: NodeJS.Timeout | null = null;
    const save = () => {
      if (saveTimer !== null) clearTimeout(saveTimer);
      saveTimer = null;
      unsaved = 0;
      try {
        this.store.saveContent(message.id, text);
      } catch {
        // a failed write (disk full) does not stop the reply; the final save tries again
      }
    };
    const off = this.host.subscribe((e) => {
      if (e.type === "queued" && e.requestId === requestId) this.emit("chat.reply", { kind: "queued", ...ids, position: e.position });
      else if (e.type === "started" && e.requestId === requestId) this.emit("chat.reply", { kind: "started", ...ids });
      else if (e.type === "token" && e.requestId === requestId) {
        text += e.text;
        // Saved before the delta goes out: what the user has seen at a save point is on disk.
        if (++unsaved >= this.saveEveryTokens) save();
        else if (saveTimer === null) saveTimer = setTimeout(save, this.saveIntervalMs);
        this.emit("chat.reply", { kind: "delta", ...ids, text: e.text });
      }
    });
    const finish = (status: Message["status"], stats: MessageStats | null, error: string | null, finalText: string) => {
      off();
      if (saveTimer !== null) clearTimeout(saveTimer);
      if (this.active.get(conversation.id) === reply) this.active.delete(conversation.id);
      const done = this.store.finishMessage(message.id, finalText, status, stats, error);
      if (done) this.emit("chat.reply", { kind: "done", ...ids, message: done });
    };
    this.host.generate({
      modelId,
      input: { kind: "chat", messages: history },
      sampling: { temperature: conversation.temperature, maxTokens: this.maxReplyTokens },
    }, requestId).then(
      (r) => finish(r.stopReason === "cancel" ? "stopped" : "complete", {
        promptTokens: r.stats.promptTokens,
        generatedTokens: r.stats.generatedTokens,
        tokensPerSecond: r.stats.decodeTokensPerSecond,
        ttftMs: r.stats.ttftMs,
        queueMs: r.stats.queueMs,
        stopReason: r.stopReason,
      }, null, r.text),
      (err: unknown) => finish("error", null, err instanceof Error ? err.message : String(err), text),
    );
    return message;
  }

  private checkIdle(conversationId: string): void {
    if (this.active.has(conversationId)) throw new RuntimeError("this conversation is already replying; stop it first", "busy");
  }

  private found<T>(value: T | null, id: string): T {
    if (value === null) throw new RuntimeError(`no conversation with id ${id}`, "not_found");
    return value;
  }
}

/** The title a conversation gets from its first message. */
function autoTitle(content: string): string {
  return content.replace(/\s+/g, " ").slice(0, 60);
}

function checkTemperature(t: number): void {
  if (!(t >= 0 && t <= 2)) throw new RuntimeError("temperature must be between 0 and 2", "invalid");
}
