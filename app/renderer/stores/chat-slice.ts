// Chat: conversations, the selected one's active path, the reply in progress,
// versions (‹ 1/2 ›), the summary that carries a full chat into a new one, and
// import. The chat's generation settings and presets are chat-settings-slice.ts.
import type { StateCreator } from "zustand";

import type { ChatReplyEvent, Conversation, Message, SearchHit } from "../../shared/app-contract.js";
import { withSettings } from "../../shared/chat-settings.js";
import { client } from "../transport/index.js";
import { createChatSettingsSlice, type ChatSettingsSlice } from "./chat-settings-slice.js";
import type { AppState } from "./store.js";
import { fileToBase64 } from "./upload.js";

/** The summary a full chat is carried on with: written by the model, then edited by the user. */
export interface SummaryDraft {
  conversationId: string;
  state: "running" | "ready" | "failed";
  text: string;
  error: string | null;
}

export interface ChatSlice extends ChatSettingsSlice {
  conversations: Conversation[];
  selectedId: string | null;
  /** The selected conversation's active path. */
  messages: Message[];
  /** The selected conversation's reply: its message and queue position (null = running). */
  reply: { messageId: string; position: number | null } | null;
  query: string;
  hits: SearchHit[] | null;
  chatError: string | null;
  chatSummary: SummaryDraft | null;
  loadConversations(): Promise<void>;
  selectConversation(id: string | null): Promise<void>;
  newConversation(): Promise<void>;
  renameConversation(id: string, title: string): Promise<void>;
  deleteConversation(id: string): Promise<void>;
  search(query: string): Promise<void>;
  send(content: string): Promise<boolean>;
  stop(): Promise<void>;
  /** A new version of a reply (default: the last one on the path). */
  regenerate(messageId?: string): Promise<void>;
  /** Edit-and-resend: a new version of your message and a new reply to it. */
  editAndResend(messageId: string, content: string): Promise<boolean>;
  /** A new version of any message, written by hand (no reply). */
  editMessage(messageId: string, content: string): Promise<boolean>;
  /** Shows another version of a turn (and the newest branch under it). */
  switchBranch(messageId: string): Promise<void>;
  /** Asks the model for a summary of the selected chat. */
  summarize(): Promise<void>;
  editSummary(text: string): void;
  closeSummary(): Promise<void>;
  /** Starts a new chat with the selected one's settings, its system prompt carrying the summary. */
  continueWithSummary(): Promise<void>;
  importChat(file: File): Promise<void>;
  onReply(e: ChatReplyEvent): void;
  clearChatError(): void;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The shortest and the longest time between two updates of a streaming reply's text in the view (see createChatSlice). */
export const deltaIntervalMs = 50;
export const maxDeltaIntervalMs = 1000;

/** The system prompt of a chat carried on from a summary. */
export function carriedSystemPrompt(systemPrompt: string, summary: string): string {
  const base = systemPrompt.trim();
  return `${base ? base + "\n\n" : ""}Summary of the earlier conversation:\n${summary.trim()}`;
}

export const createChatSlice: StateCreator<AppState, [], [], ChatSlice> = (set, get, api) => {
  // A reply's events travel apart from the call that started it and can
  // overtake its answer: deltas for a message the page does not show yet are
  // kept here, and a reply whose "done" came first is not marked running.
  const early = new Map<string, string>();
  const finished = new Map<string, Message>();
  // Tokens stream in one delta each, often a few milliseconds apart: the view takes them
  // in one update for all that came meanwhile, at once when the last update is older than
  // `interval`. Any other event, and a placed reply, first takes in what is pending, so
  // that the order of events is kept. `interval` is deltaIntervalMs, or twice what the
  // last update cost when that is more (a long open block, a slow machine): the page's
  // main thread then spends at most about a third of its time on a streaming reply.
  const pending = new Map<string, { conversationId: string; text: string }>();
  let flushTimer: ReturnType<typeof setTimeout> | null = null;
  let lastFlush = -Infinity;
  let interval = deltaIntervalMs;
  const flushDeltas = () => {
    if (flushTimer !== null) clearTimeout(flushTimer);
    flushTimer = null;
    if (pending.size === 0) return;
    const start = performance.now();
    lastFlush = start;
    const batch = [...pending];
    pending.clear();
    let { messages, reply } = get();
    for (const [messageId, { conversationId, text }] of batch) {
      if (conversationId !== get().selectedId) continue;
      const has = messages.some((m) => m.id === messageId);
      if (!has) early.set(messageId, (early.get(messageId) ?? "") + text);
      else messages = messages.map((m) => (m.id === messageId ? { ...m, content: m.content + text } : m));
      reply = { messageId, position: null };
    }
    set({ messages, reply });
    // React renders a store update in a microtask that set() queued: one queued now runs
    // once that render, its commit and its effects are done.
    queueMicrotask(() => {
      lastFlush = performance.now();
      interval = Math.min(maxDeltaIntervalMs, Math.max(deltaIntervalMs, 2 * (lastFlush - start)));
    });
  };
  const queueDelta = (e: Extract<ChatReplyEvent, { kind: "delta" }>) => {
    const p = pending.get(e.messageId);
    if (p && p.conversationId === e.conversationId) p.text += e.text;
    else {
      if (p) flushDeltas();
      pending.set(e.messageId, { conversationId: e.conversationId, text: e.text });
    }
    const wait = lastFlush + interval - performance.now();
    if (wait <= 0) flushDeltas();
    else flushTimer ??= setTimeout(flushDeltas, wait);
  };
  /** Shows a started reply: `kept` messages (without it), then `extra`, then the reply as far as it got. */
  const placeReply = (kept: Message[], extra: Message[], reply: Message) => {
    flushDeltas();
    const current = new Map(get().messages.map((m) => [m.id, m]));
    kept = kept.map((m) => current.get(m.id) ?? m);
    const shown = get().messages.find((m) => m.id === reply.id) ?? finished.get(reply.id);
    const text = early.get(reply.id) ?? "";
    early.delete(reply.id);
    const ids = new Set([reply.id, ...extra.map((m) => m.id)]);
    set({
      messages: [...kept.filter((m) => !ids.has(m.id)), ...extra, shown ?? { ...reply, content: reply.content + text }],
      reply: finished.has(reply.id) ? null : { messageId: reply.id, position: null },
    });
  };
  /** The path before `messageId` (the message leaves the view with everything after it). */
  const before = (messageId: string) => {
    const messages = get().messages;
    const at = messages.findIndex((m) => m.id === messageId);
    return at < 0 ? messages : messages.slice(0, at);
  };
  const guard = async (fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (err) {
      set({ chatError: message(err) });
    }
  };
  /** Changes made in the settings form go with the chat before anything leaves it (a switch, a send). */
  const settle = async () => {
    if (!(await get().saveSettings())) throw new Error("the chat's settings have a bad value; fix or discard them first");
  };
  return {
    ...createChatSettingsSlice(set, get, api),
    conversations: [],
    selectedId: null,
    messages: [],
    reply: null,
    query: "",
    hits: null,
    chatError: null,
    chatSummary: null,
    loadConversations: () => guard(async () => {
      const conversations = await client.chat.listConversations();
      set({ conversations });
      const { selectedId } = get();
      if (selectedId === null || !conversations.some((c) => c.id === selectedId)) {
        await get().selectConversation(conversations[0]?.id ?? null);
      }
    }),
    selectConversation: (id) => guard(async () => {
      if (id !== get().selectedId && !(await get().leaveSettings())) return;
      set({ selectedId: id, messages: [], reply: null, chatSummary: null });
      get().resetSettingsDraft();
      if (id === null) return;
      const messages = await client.chat.messages({ conversationId: id });
      if (get().selectedId !== id) return;
      const streaming = messages.find((m) => m.status === "streaming");
      set({ messages, reply: streaming ? { messageId: streaming.id, position: null } : null });
    }),
    newConversation: () => guard(async () => {
      if (!(await get().leaveSettings())) return;
      const c = await client.chat.createConversation({});
      set({ conversations: [c, ...get().conversations], query: "", hits: null });
      await get().selectConversation(c.id);
    }),
    renameConversation: (id, title) => guard(async () => {
      const c = await client.chat.renameConversation({ id, title });
      set({ conversations: get().conversations.map((x) => (x.id === id ? c : x)) });
    }),
    deleteConversation: (id) => guard(async () => {
      await client.chat.deleteConversation({ id });
      const conversations = get().conversations.filter((c) => c.id !== id);
      set({ conversations });
      if (get().selectedId === id) {
        get().resetSettingsDraft();
        set({ selectedId: null });
        await get().selectConversation(conversations[0]?.id ?? null);
      }
    }),
    search: (query) => guard(async () => {
      set({ query });
      if (query.trim() === "") {
        set({ hits: null });
        return;
      }
      const hits = await client.chat.searchConversations({ query });
      if (get().query === query) set({ hits });
    }),
    send: async (content) => {
      try {
        let id = get().selectedId;
        if (id === null) {
          const c = await client.chat.createConversation({});
          set({ conversations: [c, ...get().conversations], selectedId: c.id, messages: [] });
          id = c.id;
        }
        await settle();
        const r = await client.chat.send({ conversationId: id, content });
        if (get().selectedId === id) placeReply(get().messages, r.userMessage ? [r.userMessage] : [], r.assistantMessage);
        return true;
      } catch (err) {
        set({ chatError: message(err) });
        return false;
      }
    },
    stop: () => guard(async () => {
      const id = get().selectedId;
      if (id !== null) await client.chat.stop({ conversationId: id });
    }),
    regenerate: (messageId) => guard(async () => {
      const id = get().selectedId;
      if (id === null) return;
      await settle();
      const r = await client.chat.regenerate(messageId ? { conversationId: id, messageId } : { conversationId: id });
      if (get().selectedId !== id) return;
      // The reply answers the message it follows: what came after that leaves the view (it stays on its branch).
      const parent = r.assistantMessage.parentId;
      const messages = get().messages;
      const at = parent === null ? -1 : messages.findIndex((m) => m.id === parent);
      placeReply(messages.slice(0, at + 1), [], r.assistantMessage);
    }),
    editAndResend: async (messageId, content) => {
      const id = get().selectedId;
      if (id === null) return false;
      try {
        await settle();
        const r = await client.chat.editAndResend({ conversationId: id, messageId, content });
        if (get().selectedId === id) placeReply(before(messageId), r.userMessage ? [r.userMessage] : [], r.assistantMessage);
        return true;
      } catch (err) {
        set({ chatError: message(err) });
        return false;
      }
    },
    editMessage: async (messageId, content) => {
      const id = get().selectedId;
      if (id === null) return false;
      try {
        const version = await client.chat.editMessage({ conversationId: id, messageId, content });
        if (get().selectedId === id) set({ messages: [...before(messageId), version] });
        return true;
      } catch (err) {
        set({ chatError: message(err) });
        return false;
      }
    },
    switchBranch: (messageId) => guard(async () => {
      const id = get().selectedId;
      if (id === null) return;
      const messages = await client.chat.switchBranch({ conversationId: id, messageId });
      if (get().selectedId === id) set({ messages });
    }),
    summarize: () => guard(async () => {
      const id = get().selectedId;
      if (id === null) return;
      set({ chatSummary: { conversationId: id, state: "running", text: "", error: null } });
      try {
        const { summary } = await client.chat.summarize({ conversationId: id });
        if (get().chatSummary?.conversationId === id) set({ chatSummary: { conversationId: id, state: "ready", text: summary, error: null } });
      } catch (err) {
        if (get().chatSummary?.conversationId === id) set({ chatSummary: { conversationId: id, state: "failed", text: "", error: message(err) } });
      }
    }),
    editSummary: (text) => {
      const s = get().chatSummary;
      if (s) set({ chatSummary: { ...s, text } });
    },
    closeSummary: () => guard(async () => {
      const s = get().chatSummary;
      set({ chatSummary: null });
      if (s?.state === "running") await client.chat.stop({ conversationId: s.conversationId });
    }),
    continueWithSummary: () => guard(async () => {
      const s = get().chatSummary;
      const from = get().conversations.find((c) => c.id === s?.conversationId);
      if (!s || !from || s.text.trim() === "") return;
      if (!(await get().leaveSettings())) return;
      const settings = withSettings(from.settings, { systemPrompt: carriedSystemPrompt(from.settings.systemPrompt, s.text) });
      const c = await client.chat.createConversation({ title: `${from.title} (continued)`, settings });
      set({ conversations: [c, ...get().conversations], query: "", hits: null, chatSummary: null });
      await get().selectConversation(c.id);
    }),
    importChat: (file) => guard(async () => {
      const c = await client.chat.importConversation({ fileName: file.name, data: await fileToBase64(file) });
      set({ conversations: [c, ...get().conversations.filter((x) => x.id !== c.id)], query: "", hits: null });
      await get().selectConversation(c.id);
    }),
    onReply: (e) => {
      if (e.conversationId !== get().selectedId) {
        if (e.kind === "done") void get().loadConversations();
        return;
      }
      if (e.kind === "delta") {
        queueDelta(e);
        return;
      }
      flushDeltas();
      const messages = get().messages;
      switch (e.kind) {
        case "queued":
          set({ reply: { messageId: e.messageId, position: e.position } });
          break;
        case "started":
          set({ reply: { messageId: e.messageId, position: null } });
          break;
        case "done": {
          early.delete(e.messageId);
          finished.set(e.messageId, e.message);
          if (finished.size > 64) finished.delete(finished.keys().next().value!);
          const has = messages.some((m) => m.id === e.messageId);
          set({
            messages: has ? messages.map((m) => (m.id === e.messageId ? e.message : m)) : messages,
            reply: get().reply?.messageId === e.messageId ? null : get().reply,
          });
          void client.chat.listConversations().then((conversations) => set({ conversations }), () => undefined);
          break;
        }
      }
    },
    clearChatError: () => set({ chatError: null }),
  };
};
