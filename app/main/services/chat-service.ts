// ChatService: conversations (ConversationStore: a message tree per chat) +
// replies (RuntimeHost, on the model that ModelManager holds). A reply streams
// as `chat.reply` events and is saved as it grows: every 16 tokens or 250 ms,
// whichever comes first, so a crash loses at most the last few tokens (the
// demo model streams a whole reply in about 0.2 s: a time-only throttle of a
// second would lose all of it).
//
// Before a reply, the history is fitted to the model's context
// (context-window.ts): under the chat's "shift" policy the oldest turns leave
// the prompt (never the database), under "stop" the reply ends at once with
// stop reason "context" and a message offering a new chat with a summary.
import { randomUUID } from "node:crypto";

import {
  maxImportBytes, type ChatService, type Conversation, type EventSink, type ExportedFile, type Message, type MessageStats,
  type SearchHit, type SendReply,
} from "../../shared/app-contract.js";
import {
  builtInPresets, checkSettings, defaultGenerationSettings, withSettings, type GenerationSettings, type Preset,
} from "../../shared/chat-settings.js";
import { replyFormat, withoutReasoning } from "../../shared/reply-channels.js";
import { draftFiguresText } from "../../shared/speculative-stats.js";
import type { ChatMessage, LoadedModel, RequestId, SamplingSettings, StopReason } from "../../shared/runtime-contract.js";
import { ChatFileError, chatFileOf, readChatFile } from "./chat-file.js";
import { fitHistory, minimumReplyRoom, replyReserve, type FitResult } from "./context-window.js";
import type { ConversationStore } from "./conversation-store.js";
import type { ModelManager } from "./model-manager.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";

export interface ChatServiceOptions {
  /** The longest a streamed token waits before the reply is written to the database. Defaults to {@link defaultSaveIntervalMs}. */
  saveIntervalMs?: number;
  /** A growing reply is written at least every this many tokens. Defaults to {@link defaultSaveEveryTokens}. */
  saveEveryTokens?: number;
}
export const defaultSaveIntervalMs = 250 satisfies NonNullable<ChatServiceOptions["saveIntervalMs"]>;
export const defaultSaveEveryTokens = 16 satisfies NonNullable<ChatServiceOptions["saveEveryTokens"]>;

/** A summary is a few sentences: it gets at most this many tokens (and at most a quarter of the context). */
export const summaryMaxTokens = 384;

interface ActiveWork {
  requestId: RequestId;
  /** Aborts what happens before the runtime has the request (the prompt's render). */
  controller: AbortController;
}

/** A message of the history sent to the model, with the id it has in the tree. */
interface HistoryItem extends ChatMessage {
  id: string;
}

export class ChatServiceImpl implements ChatService {
  private readonly active = new Map<string, ActiveWork>();  // conversationId → its reply or summary
  private readonly saveIntervalMs: number;
  private readonly saveEveryTokens: number;

  constructor(
    private readonly store: ConversationStore,
    private readonly host: RuntimeHost,
    private readonly models: ModelManager,
    private readonly emit: EventSink,
    options: ChatServiceOptions = {},
  ) {
    this.saveIntervalMs = options.saveIntervalMs ?? defaultSaveIntervalMs;
    this.saveEveryTokens = Math.max(1, options.saveEveryTokens ?? defaultSaveEveryTokens);
  }

  async listConversations(): Promise<Conversation[]> {
    return this.store.listConversations();
  }

  async createConversation(req: { title?: string; settings?: Partial<GenerationSettings> }): Promise<Conversation> {
    const settings = withSettings(defaultGenerationSettings, req.settings === undefined ? {} : checked(req.settings));
    return this.store.createConversation({ title: req.title?.slice(0, 200), settings });
  }

  async renameConversation(req: { id: string; title: string }): Promise<Conversation> {
    const title = req.title.trim();
    if (title.length === 0) throw new RuntimeError("a title cannot be empty", "invalid");
    return this.found(this.store.updateConversation(req.id, { title: title.slice(0, 200) }), req.id);
  }

  async updateSettings(req: { id: string; settings: Partial<GenerationSettings> }): Promise<Conversation> {
    const c = this.conversation(req.id);
    return this.found(this.store.updateConversation(c.id, { settings: withSettings(c.settings, checked(req.settings)) }), req.id);
  }

  async deleteConversation(req: { id: string }): Promise<{ deleted: boolean }> {
    await this.stop({ conversationId: req.id });
    return { deleted: this.store.deleteConversation(req.id) };
  }

  async searchConversations(req: { query: string }): Promise<SearchHit[]> {
    return this.store.search(req.query);
  }

  async messages(req: { conversationId: string }): Promise<Message[]> {
    return this.store.messages(this.conversation(req.conversationId).id);
  }

  async send(req: { conversationId: string; content: string }): Promise<SendReply> {
    const conversation = this.conversation(req.conversationId);
    const content = nonEmpty(req.content);
    this.checkIdle(conversation.id);
    const model = this.models.requireCurrent();
    const path = this.store.messages(conversation.id);
    const userMessage = this.store.addMessage({
      conversationId: conversation.id, parentId: path.at(-1)?.id ?? null, role: "user", content, status: "complete",
    });
    if (path.length === 0 && conversation.title === "New chat") this.store.updateConversation(conversation.id, { title: autoTitle(content) });
    const assistantMessage = this.startReply(conversation, model, [...path, userMessage]);
    return { userMessage, assistantMessage };
  }

  async regenerate(req: { conversationId: string; messageId?: string }): Promise<SendReply> {
    const conversation = this.conversation(req.conversationId);
    this.checkIdle(conversation.id);
    const model = this.models.requireCurrent();
    let target: Message | undefined;
    if (req.messageId !== undefined) {
      target = this.message(conversation.id, req.messageId);
      if (target.role !== "assistant") throw new RuntimeError("only a reply can be regenerated; edit your message to resend it", "invalid");
    } else {
      target = this.store.messages(conversation.id).at(-1);
      if (!target) throw new RuntimeError("there is nothing to regenerate", "invalid");
    }
    // A reply gets a new sibling; a message of yours at the end of the path gets its (first) reply.
    const parentId = target.role === "assistant" ? target.parentId : target.id;
    if (parentId === null) throw new RuntimeError("this reply answers no message, so it cannot be regenerated", "invalid");
    const assistantMessage = this.startReply(conversation, model, this.store.pathTo(parentId));
    return { userMessage: null, assistantMessage };
  }

  async editAndResend(req: { conversationId: string; messageId: string; content: string }): Promise<SendReply> {
    const conversation = this.conversation(req.conversationId);
    const content = nonEmpty(req.content);
    const target = this.message(conversation.id, req.messageId);
    if (target.role !== "user") throw new RuntimeError("only your own messages can be resent; a reply is edited with Edit", "invalid");
    this.checkIdle(conversation.id);
    const model = this.models.requireCurrent();
    const userMessage = this.addVersion(conversation, target, content);
    const assistantMessage = this.startReply(conversation, model, this.store.pathTo(userMessage.id));
    return { userMessage, assistantMessage };
  }

  async editMessage(req: { conversationId: string; messageId: string; content: string }): Promise<Message> {
    const conversation = this.conversation(req.conversationId);
    const content = nonEmpty(req.content);
    const target = this.message(conversation.id, req.messageId);
    this.checkIdle(conversation.id);
    return this.addVersion(conversation, target, content);
  }

  async switchBranch(req: { conversationId: string; messageId: string }): Promise<Message[]> {
    const conversation = this.conversation(req.conversationId);
    const target = this.message(conversation.id, req.messageId);
    this.checkIdle(conversation.id);
    this.store.activate(conversation.id, target.id);
    return this.store.messages(conversation.id);
  }

  async stop(req: { conversationId: string }): Promise<{ stopped: boolean }> {
    const a = this.active.get(req.conversationId);
    if (!a) return { stopped: false };
    if (!a.controller.signal.aborted) a.controller.abort();
    this.host.cancel(a.requestId);
    return { stopped: true };
  }

  async summarize(req: { conversationId: string }): Promise<{ summary: string }> {
    const conversation = this.conversation(req.conversationId);
    this.checkIdle(conversation.id);
    const model = this.models.requireCurrent();
    const history = historyOf(this.store.messages(conversation.id));
    if (history.length === 0) throw new RuntimeError("there is nothing to summarize yet", "invalid");
    const work: ActiveWork = { requestId: randomUUID(), controller: new AbortController() };
    this.active.set(conversation.id, work);
    try {
      const maxTokens = Math.min(summaryMaxTokens, Math.max(16, Math.floor(model.contextSize / 4)));
      // The newest part of the chat that fits, as one transcript for the model to condense.
      const render = (start: number) => this.host.chatPrompt(model.id, summaryPrompt(history.slice(start)), work.controller.signal);
      let tokens = await render(0);
      const budget = model.contextSize - maxTokens;
      if (tokens.length > budget) {
        let lo = 0;
        let hi = history.length - 1;
        tokens = await render(hi);
        if (tokens.length > budget) throw new RuntimeError("the chat's last message alone is too long to summarize in this model's context", "invalid");
        while (hi - lo > 1) {
          const mid = (lo + hi) >> 1;
          const t = await render(mid);
          if (t.length <= budget) [hi, tokens] = [mid, t];
          else lo = mid;
        }
      }
      if (work.controller.signal.aborted) throw new RuntimeError("the summary was stopped", "cancelled");
      const r = await this.host.generate({
        modelId: model.id, input: { kind: "tokens", tokens }, sampling: { temperature: 0.3, maxTokens },
      }, work.requestId);
      if (r.stopReason === "cancel") throw new RuntimeError("the summary was stopped", "cancelled");
      const summary = withoutReasoning(r.text).trim();
      if (summary.length === 0) throw new RuntimeError("the model wrote an empty summary; write one yourself or try again", "failed");
      return { summary };
    } catch (err) {
      if (work.controller.signal.aborted) throw new RuntimeError("the summary was stopped", "cancelled");
      throw err;
    } finally {
      if (this.active.get(conversation.id) === work) this.active.delete(conversation.id);
    }
  }

  async exportConversation(req: { id: string; format: "markdown" | "json" }): Promise<ExportedFile> {
    const c = this.conversation(req.id);
    const base = c.title.replace(/[^\p{L}\p{N}._-]+/gu, "-").replace(/^-+|-+$/g, "").slice(0, 60) || "conversation";
    if (req.format === "json") {
      const file = chatFileOf(c, this.store.tree(c.id), this.store.activeLeaf(c.id));
      return { filename: base + ".json", mimeType: "application/json", content: JSON.stringify(file, null, 2) + "\n" };
    }
    const s = c.settings;
    const lines = [
      `# ${c.title}`, "",
      `_System prompt:_ ${s.systemPrompt || "(none)"}  `,
      `_Sampling:_ temperature ${s.temperature}, top-p ${s.topP}, top-k ${s.topK}, min-p ${s.minP}, repeat penalty ${s.repeatPenalty}` +
        `, seed ${s.seed ?? "random"}, max tokens ${s.maxTokens ?? "up to the context"}`, "",
    ];
    for (const m of this.store.messages(c.id)) {
      const who = m.role === "user" ? "User" : `Assistant${m.model ? ` (${m.model})` : ""}`;
      lines.push(`## ${who}${m.edited ? " (edited)" : ""}`, "", m.content, "");
      if (m.stats) {
        const drafts = draftFiguresText(m.stats);
        lines.push(`_${m.stats.generatedTokens} tokens, ${m.stats.tokensPerSecond.toFixed(1)} tok/s${drafts === null ? "" : ` (${drafts.replace(" · ", ", ")})`}, ` +
          `TTFT ${m.stats.ttftMs.toFixed(0)} ms, stop: ${m.stats.stopReason}_`, "");
      }
    }
    return { filename: base + ".md", mimeType: "text/markdown", content: lines.join("\n") };
  }

  async importConversation(req: { fileName: string; data: string }): Promise<Conversation> {
    const bytes = Buffer.from(req.data, "base64");
    const name = req.fileName.slice(0, 200);
    if (bytes.length > maxImportBytes) throw new RuntimeError(`${name}: larger than ${maxImportBytes / (1024 * 1024)} MiB`, "invalid");
    try {
      return this.store.importConversation(readChatFile(bytes));
    } catch (err) {
      if (err instanceof ChatFileError) throw new RuntimeError(`${name}: ${err.message}`, "invalid");
      throw err;
    }
  }

  async listPresets(): Promise<Preset[]> {
    return [...builtInPresets, ...this.store.listPresets()];
  }

  async savePreset(req: { name: string; settings: Partial<GenerationSettings> }): Promise<Preset> {
    const name = req.name.trim().replace(/\s+/g, " ");
    if (name.length === 0 || name.length > 60) throw new RuntimeError("a preset's name must have 1 to 60 characters", "invalid");
    if (builtInPresets.some((p) => p.name.toLowerCase() === name.toLowerCase()))
      throw new RuntimeError(`${name} is a built-in preset; choose another name`, "invalid");
    return this.store.savePreset(name, checked(req.settings));
  }

  async deletePreset(req: { id: string }): Promise<{ deleted: boolean }> {
    if (builtInPresets.some((p) => p.id === req.id)) throw new RuntimeError("built-in presets cannot be deleted", "invalid");
    return { deleted: this.store.deletePreset(req.id) };
  }

  /** Cancels every reply (shutdown). */
  async dispose(): Promise<void> {
    for (const a of this.active.values()) {
      a.controller.abort();
      this.host.cancel(a.requestId);
    }
  }

  /** A new version of `target` (same parent) with `content`, made by hand; a title made from the first message follows it. */
  private addVersion(conversation: Conversation, target: Message, content: string): Message {
    const version = this.store.addMessage({
      conversationId: conversation.id, parentId: target.parentId, role: target.role, content, status: "complete",
      model: target.model, edited: true,
    });
    // A title made from the first message follows its edit; one the user gave stays.
    if (target.parentId === null && target.role === "user" && conversation.title === autoTitle(target.content))
      this.store.updateConversation(conversation.id, { title: autoTitle(content) });
    return version;
  }

  /** Starts a reply to `path` (the active path up to the message it answers) as a new child of its last message. */
  private startReply(conversation: Conversation, model: LoadedModel, path: readonly Message[]): Message {
    const parentId = path.at(-1)?.id ?? null;
    const message = this.store.addMessage({
      conversationId: conversation.id, parentId, role: "assistant", content: "", status: "streaming", model: model.name,
    });
    const work: ActiveWork = { requestId: randomUUID(), controller: new AbortController() };
    this.active.set(conversation.id, work);
    void this.runReply(conversation, model, historyOf(path), message, work);
    return message;
  }

  private async runReply(conversation: Conversation, model: LoadedModel, history: HistoryItem[], message: Message, work: ActiveWork): Promise<void> {
    const ids = { conversationId: conversation.id, messageId: message.id };
    const settings = conversation.settings;
    const contextSize = model.contextSize;
    const { requestId, controller } = work;

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
    let off = () => {};
    const finish = (status: Message["status"], stats: MessageStats | null, error: string | null, finalText: string) => {
      off();
      if (saveTimer !== null) clearTimeout(saveTimer);
      if (this.active.get(conversation.id) === work) this.active.delete(conversation.id);
      const done = this.store.finishMessage(message.id, finalText, status, stats, error);
      if (done) this.emit("chat.reply", { kind: "done", ...ids, message: done });
    };
    const emptyStats = (stopReason: StopReason, promptTokens: number): MessageStats => ({
      promptTokens, generatedTokens: 0, tokensPerSecond: 0, ttftMs: 0, queueMs: 0, stopReason, contextSize,
    });

    const reserve = replyReserve(contextSize, settings.maxTokens);
    let fit: FitResult;
    try {
      fit = await fitHistory(settings.systemPrompt, history, { contextSize, reserve, policy: settings.overflow },
        (messages) => this.host.chatPrompt(model.id, messages, controller.signal));
    } catch (err) {
      if (controller.signal.aborted) finish("stopped", emptyStats("cancel", 0), null, "");
      else finish("error", null, errorMessage(err), "");
      return;
    }
    if (controller.signal.aborted) return finish("stopped", emptyStats("cancel", 0), null, "");
    if (fit.kind === "full") {
      return finish("error", emptyStats("context", fit.promptTokens),
        `This chat is full: its ${fit.promptTokens} tokens and room for a reply (${reserve}) do not fit in the model's context ` +
        `of ${contextSize} tokens. Start a new chat that carries a summary, or let this chat drop its oldest turns ` +
        `(Settings: when the context is full).`, "");
    }
    if (fit.kind === "too_long") {
      return finish("error", emptyStats("context", fit.promptTokens),
        `This message does not fit: with the system prompt it takes ${fit.promptTokens} of the model's ${contextSize} tokens ` +
        `of context, leaving less than ${minimumReplyRoom(contextSize)} for a reply. Shorten it, or load the model with a larger context.`, "");
    }
    const contextFrom = fit.start > 0 ? history[fit.start]!.id : null;
    if (contextFrom !== null) this.store.setContextFrom(message.id, contextFrom);

    off = this.host.subscribe((e) => {
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
    try {
      const r = await this.host.generate({
        modelId: model.id, input: { kind: "tokens", tokens: fit.tokens }, sampling: samplingOf(settings),
      }, requestId);
      finish(r.stopReason === "cancel" ? "stopped" : "complete", {
        promptTokens: r.stats.promptTokens,
        generatedTokens: r.stats.generatedTokens,
        tokensPerSecond: r.stats.decodeTokensPerSecond,
        ttftMs: r.stats.ttftMs,
        queueMs: r.stats.queueMs,
        stopReason: r.stopReason,
        contextSize,
        draftTokens: r.stats.draftTokens,
        acceptedDraftTokens: r.stats.acceptedDraftTokens,
        windows: r.stats.windows,
        drafter: r.stats.drafter,
      }, null, r.text);
    } catch (err) {
      finish("error", null, errorMessage(err), text);
    }
  }

  private checkIdle(conversationId: string): void {
    if (this.active.has(conversationId)) throw new RuntimeError("this conversation is already replying; stop it first", "busy");
  }

  private conversation(id: string): Conversation {
    return this.found(this.store.getConversation(id), id);
  }

  private message(conversationId: string, id: string): Message {
    const m = this.store.getMessage(id);
    if (!m || m.conversationId !== conversationId) throw new RuntimeError(`no message with id ${id} in this conversation`, "not_found");
    return m;
  }

  private found<T>(value: T | null, id: string): T {
    if (value === null) throw new RuntimeError(`no conversation with id ${id}`, "not_found");
    return value;
  }
}

/** The chat's settings as the runtime takes them; no max tokens = up to the context. */
export function samplingOf(s: GenerationSettings): SamplingSettings {
  return {
    temperature: s.temperature, topP: s.topP, topK: s.topK, minP: s.minP, repeatPenalty: s.repeatPenalty,
    ...(s.seed !== null ? { seed: s.seed } : {}),
    ...(s.maxTokens !== null ? { maxTokens: s.maxTokens } : {}),
  };
}

/**
 * The messages the model reads: a reply stopped before its first token says
 * nothing and is left out. A harmony reply (gpt-oss) is read back as its final
 * answer: its template takes an earlier turn's content as that, and refuses
 * content with channel tokens. `<think>` replies stay as they are: their
 * templates drop the reasoning themselves.
 */
function historyOf(path: readonly Message[]): HistoryItem[] {
  return path.filter((m) => m.content.length > 0).map((m) => ({
    id: m.id, role: m.role,
    content: m.role === "assistant" && replyFormat(m.content, { complete: true }) === "harmony" ? withoutReasoning(m.content) : m.content,
  }));
}

function summaryPrompt(history: readonly HistoryItem[]): ChatMessage[] {
  const transcript = history.map((m) => `${m.role === "user" ? "User" : "Assistant"}: ${withoutReasoning(m.content).trim()}`).join("\n\n");
  return [
    { role: "system", content: "You write short, faithful summaries of conversations." },
    {
      role: "user",
      content: "Summarize the conversation below in a few sentences. Keep the facts, names, decisions and open questions " +
        "that someone continuing it would need.\n\n" + transcript,
    },
  ];
}

function checked(settings: unknown): Partial<GenerationSettings> {
  const r = checkSettings(settings);
  if (!r.ok) throw new RuntimeError(r.problem, "invalid");
  return r.settings;
}

function nonEmpty(content: string): string {
  const text = content.trim();
  if (text.length === 0) throw new RuntimeError("the message is empty", "invalid");
  return text;
}

/** The title a conversation gets from its first message. */
function autoTitle(content: string): string {
  return content.replace(/\s+/g, " ").slice(0, 60);
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
