// Chat: conversations, the selected one's messages, the reply in progress.
import type { StateCreator } from "zustand";

import type { ChatReplyEvent, Conversation, Message, SearchHit } from "../../shared/app-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface ChatSlice {
  conversations: Conversation[];
  selectedId: string | null;
  messages: Message[];
  /** The selected conversation's reply: its message and queue position (null = running). */
  reply: { messageId: string; position: number | null } | null;
  query: string;
  hits: SearchHit[] | null;
  chatError: string | null;
  loadConversations(): Promise<void>;
  selectConversation(id: string | null): Promise<void>;
  newConversation(): Promise<void>;
  renameConversation(id: string, title: string): Promise<void>;
  deleteConversation(id: string): Promise<void>;
  search(query: string): Promise<void>;
  send(content: string): Promise<boolean>;
  stop(): Promise<void>;
  regenerate(): Promise<void>;
  /** Edit-and-resend: the message gets `content`, later messages go, and a new reply starts. */
  editAndResend(messageId: string, content: string): Promise<boolean>;
  updateSettings(systemPrompt: string, temperature: number): Promise<void>;
  onReply(e: ChatReplyEvent): void;
  clearChatError(): void;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createChatSlice: StateCreator<AppState, [], [], ChatSlice> = (set, get) => {
  // A reply's events travel apart from the call that started it and can
  // overtake its answer: deltas for a message the page does not show yet are
  // kept here, and a reply whose "done" came first is not marked running.
  const early = new Map<string, string>();
  const finished = new Set<string>();
  /** Shows a started reply: `kept` messages (without it), then `extra`, then the reply as far as it got. */
  const placeReply = (kept: Message[], extra: Message[], reply: Message) => {
    const shown = get().messages.find((m) => m.id === reply.id);
    const text = early.get(reply.id) ?? "";
    early.delete(reply.id);
    const ids = new Set([reply.id, ...extra.map((m) => m.id)]);
    set({
      messages: [...kept.filter((m) => !ids.has(m.id)), ...extra, shown ?? { ...reply, content: reply.content + text }],
      reply: finished.has(reply.id) ? null : { messageId: reply.id, position: null },
    });
  };
  const guard = async (fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (err) {
      set({ chatError: message(err) });
    }
  };
  return {
    conversations: [],
    selectedId: null,
    messages: [],
    reply: null,
    query: "",
    hits: null,
    chatError: null,
    loadConversations: () => guard(async () => {
      const conversations = await client.chat.listConversations();
      set({ conversations });
      const { selectedId } = get();
      if (selectedId === null || !conversations.some((c) => c.id === selectedId)) {
        await get().selectConversation(conversations[0]?.id ?? null);
      }
    }),
    selectConversation: (id) => guard(async () => {
      set({ selectedId: id, messages: [], reply: null });
      if (id === null) return;
      const messages = await client.chat.messages({ conversationId: id });
      if (get().selectedId !== id) return;
      const streaming = messages.find((m) => m.status === "streaming");
      set({ messages, reply: streaming ? { messageId: streaming.id, position: null } : null });
    }),
    newConversation: () => guard(async () => {
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
      if (get().selectedId === id) await get().selectConversation(conversations[0]?.id ?? null);
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
    regenerate: () => guard(async () => {
      const id = get().selectedId;
      if (id === null) return;
      const r = await client.chat.regenerate({ conversationId: id });
      if (get().selectedId !== id) return;
      const messages = get().messages.filter((m) => m.id !== r.assistantMessage.id);
      const kept = messages.at(-1)?.role === "assistant" ? messages.slice(0, -1) : messages;  // the reply it replaces
      placeReply(kept, [], r.assistantMessage);
    }),
    editAndResend: async (messageId, content) => {
      const id = get().selectedId;
      if (id === null) return false;
      try {
        const r = await client.chat.editAndResend({ conversationId: id, messageId, content });
        if (get().selectedId !== id) return true;
        const messages = get().messages;
        const at = messages.findIndex((m) => m.id === messageId);
        placeReply(at < 0 ? messages : messages.slice(0, at), r.userMessage ? [r.userMessage] : [], r.assistantMessage);
        return true;
      } catch (err) {
        set({ chatError: message(err) });
        return false;
      }
    },
    updateSettings: (systemPrompt, temperature) => guard(async () => {
      const id = get().selectedId;
      if (id === null) return;
      const c = await client.chat.updateSettings({ id, systemPrompt, temperature });
      set({ conversations: get().conversations.map((x) => (x.id === id ? c : x)) });
    }),
    onReply: (e) => {
      if (e.conversationId !== get().selectedId) {
        if (e.kind === "done") void get().loadConversations();
        return;
      }
      const messages = get().messages;
      switch (e.kind) {
        case "queued":
          set({ reply: { messageId: e.messageId, position: e.position } });
          break;
        case "started":
          set({ reply: { messageId: e.messageId, position: null } });
          break;
        case "delta": {
          const has = messages.some((m) => m.id === e.messageId);
          if (!has) early.set(e.messageId, (early.get(e.messageId) ?? "") + e.text);
          set({
            messages: has ? messages.map((m) => (m.id === e.messageId ? { ...m, content: m.content + e.text } : m)) : messages,
            reply: { messageId: e.messageId, position: null },
          });
          break;
        }
        case "done": {
          early.delete(e.messageId);
          finished.add(e.messageId);
          const has = messages.some((m) => m.id === e.messageId);
          set({
            messages: has ? messages.map((m) => (m.id === e.messageId ? e.message : m)) : [...messages, e.message],
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
