// The conversation list: new chat, import of an exported .json, search,
// rename and delete.
import { useRef, useState } from "react";
import { useShallow } from "zustand/react/shallow";

import type { Conversation } from "../../shared/app-contract.js";
import { useApp } from "../stores/store.js";

export function ConversationList() {
  const { conversations, selectedId, hits, query } = useApp(useShallow((s) => ({
    conversations: s.conversations, selectedId: s.selectedId, hits: s.hits, query: s.query,
  })));
  const select = useApp((s) => s.selectConversation);
  const create = useApp((s) => s.newConversation);
  const rename = useApp((s) => s.renameConversation);
  const remove = useApp((s) => s.deleteConversation);
  const search = useApp((s) => s.search);
  const importChat = useApp((s) => s.importChat);
  const fileInput = useRef<HTMLInputElement>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const [title, setTitle] = useState("");
  const rows: { c: Conversation; snippet: string }[] = hits ? hits.map((h) => ({ c: h.conversation, snippet: h.snippet }))
    : conversations.map((c) => ({ c, snippet: "" }));
  return (
    <aside className="conversations">
      <div className="conv-actions">
        <button type="button" className="primary" onClick={() => void create()} data-testid="new-chat">New chat</button>
        <button type="button" onClick={() => fileInput.current?.click()} title="Import a chat exported as .json">Import…</button>
        <input ref={fileInput} type="file" accept=".json,application/json" hidden data-testid="import-file"
          onChange={(e) => {
            const file = e.target.files?.[0];
            e.target.value = "";
            if (file) void importChat(file);
          }} />
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
              <button type="button" className="conv-title" onClick={() => void select(c.id)} title={c.title}
                aria-current={c.id === selectedId ? "true" : undefined}>
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
