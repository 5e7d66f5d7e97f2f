import { useEffect, useRef, useState, type KeyboardEvent } from "react";
import { useShallow } from "zustand/react/shallow";

import type { Conversation } from "../../shared/app-contract.js";
import { download } from "../common/format.js";
import { client } from "../transport/index.js";
import { useApp } from "../stores/store.js";
import { MessageView } from "./MessageView.js";

function ConversationList() {
  const { conversations, selectedId, hits, query } = useApp(useShallow((s) => ({
    conversations: s.conversations, selectedId: s.selectedId, hits: s.hits, query: s.query,
  })));
  const select = useApp((s) => s.selectConversation);
  const create = useApp((s) => s.newConversation);
  const rename = useApp((s) => s.renameConversation);
  const remove = useApp((s) => s.deleteConversation);
  const search = useApp((s) => s.search);
  const [editing, setEditing] = useState<string | null>(null);
  const [title, setTitle] = useState("");
  const rows: { c: Conversation; snippet: string }[] = hits ? hits.map((h) => ({ c: h.conversation, snippet: h.snippet }))
    : conversations.map((c) => ({ c, snippet: "" }));
  return (
    <aside className="conversations">
      <div className="conv-actions">
        <button type="button" className="primary" onClick={() => void create()} data-testid="new-chat">New chat</button>
      </div>
      <input type="search" placeholder="Search conversations" value={query} onChange={(e) => void search(e.target.value)} aria-label="Search conversations" />
      <ul data-testid="conversation-list">
        {rows.map(({ c, snippet }) => (
          <li key={c.id} className={c.id === selectedId ? "selected" : ""}>
            {editing === c.id ? (
              <form onSubmit={(e) => { e.preventDefault(); void rename(c.id, title); setEditing(null); }}>
                <input autoFocus value={title} onChange={(e) => setTitle(e.target.value)} onBlur={() => setEditing(null)} aria-label="Conversation title" />
              </form>
            ) : (
              <button type="button" className="conv-title" onClick={() => void select(c.id)} title={c.title}>
                <span>{c.title}</span>
                {snippet && <small>{snippet}</small>}
              </button>
            )}
            <span className="conv-tools">
              <button type="button" className="icon" aria-label={`Rename ${c.title}`} title="Rename" onClick={() => { setEditing(c.id); setTitle(c.title); }}>✎</button>
              <button type="button" className="icon" aria-label={`Delete ${c.title}`} title="Delete"
                onClick={() => { if (window.confirm(`Delete “${c.title}”?`)) void remove(c.id); }}>✕</button>
            </span>
          </li>
        ))}
        {rows.length === 0 && <li className="empty">{hits ? "No matches" : "No conversations yet"}</li>}
      </ul>
    </aside>
  );
}

function Settings({ c }: { c: Conversation }) {
  const update = useApp((s) => s.updateSettings);
  const [prompt, setPrompt] = useState(c.systemPrompt);
  const [temp, setTemp] = useState(c.temperature);
  useEffect(() => { setPrompt(c.systemPrompt); setTemp(c.temperature); }, [c.id, c.systemPrompt, c.temperature]);
  return (
    <form className="settings" onSubmit={(e) => { e.preventDefault(); void update(prompt, temp); }}>
      <label>System prompt
        <textarea rows={2} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
      </label>
      <label>Temperature {temp.toFixed(2)}
        <input type="range" min={0} max={2} step={0.05} value={temp} onChange={(e) => setTemp(Number(e.target.value))} />
      </label>
      <button type="submit">Save</button>
    </form>
  );
}

export function ChatView() {
  const { messages, reply, selectedId, conversations, chatError, current } = useApp(useShallow((s) => ({
    messages: s.messages, reply: s.reply, selectedId: s.selectedId, conversations: s.conversations, chatError: s.chatError, current: s.current,
  })));
  const send = useApp((s) => s.send);
  const stop = useApp((s) => s.stop);
  const regenerate = useApp((s) => s.regenerate);
  const clearError = useApp((s) => s.clearChatError);
  const [draft, setDraft] = useState("");
  const [showSettings, setShowSettings] = useState(false);
  const bottom = useRef<HTMLDivElement>(null);
  const conversation = conversations.find((c) => c.id === selectedId) ?? null;
  const busy = reply !== null;

  useEffect(() => { bottom.current?.scrollIntoView({ block: "end" }); }, [messages]);
  useEffect(() => {
    const onKey = (e: globalThis.KeyboardEvent) => { if (e.key === "Escape" && useApp.getState().reply) void useApp.getState().stop(); };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);

  const submit = async () => {
    const text = draft.trim();
    if (!text || busy) return;
    if (await send(text)) setDraft("");
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void submit();
    }
  };
  const exportAs = async (format: "markdown" | "json") => {
    if (!conversation) return;
    const f = await client.chat.exportConversation({ id: conversation.id, format });
    download(f.filename, f.mimeType, f.content);
  };

  return (
    <div className="chat">
      <ConversationList />
      <section className="thread">
        <header className="thread-head">
          <h2>{conversation?.title ?? "Chat"}</h2>
          <span className="model-tag">{current ? current.name : "no model loaded"}</span>
          {conversation && (
            <span className="head-tools">
              <button type="button" onClick={() => setShowSettings(!showSettings)} aria-expanded={showSettings}>Settings</button>
              <button type="button" onClick={() => void exportAs("markdown")}>Export .md</button>
              <button type="button" onClick={() => void exportAs("json")}>Export .json</button>
            </span>
          )}
        </header>
        {showSettings && conversation && <Settings c={conversation} />}
        <div className="messages" data-testid="messages">
          {messages.length === 0 && <p className="hint">Ask something. Enter sends, Shift+Enter adds a line, Esc stops a reply.</p>}
          {messages.map((m) => (
            <MessageView key={m.id} m={m} streaming={reply?.messageId === m.id} position={reply?.messageId === m.id ? reply.position : null} canEdit={!busy} />
          ))}
          <div ref={bottom} />
        </div>
        {chatError && <div className="banner error" role="alert">{chatError} <button type="button" className="small" onClick={clearError}>Dismiss</button></div>}
        <div className="composer">
          <textarea value={draft} onChange={(e) => setDraft(e.target.value)} onKeyDown={onKeyDown} rows={3}
            placeholder={current ? "Message (Enter to send, Shift+Enter for a new line)" : "Load a model on the Models page first"} aria-label="Message" />
          <div className="composer-buttons">
            {busy
              ? <button type="button" className="danger" onClick={() => void stop()} data-testid="stop">Stop (Esc)</button>
              : <button type="button" className="primary" onClick={() => void submit()} disabled={!draft.trim()} data-testid="send">Send</button>}
            <button type="button" onClick={() => void regenerate()} disabled={busy || messages.length === 0} data-testid="regenerate">Regenerate</button>
          </div>
        </div>
      </section>
    </div>
  );
}
