// One message of the thread: a user message (with edit-and-resend) or an
// assistant reply (markdown, queue position, status and stats).
import { useState, type KeyboardEvent } from "react";

import type { Message } from "../../shared/app-contract.js";
import { Markdown } from "../common/Markdown.js";
import { useApp } from "../stores/store.js";

interface Props {
  m: Message;
  streaming: boolean;
  position: number | null;
  /** False while a reply runs: editing would have to stop it first. */
  canEdit: boolean;
}

export function MessageView({ m, streaming, position, canEdit }: Props) {
  const [editing, setEditing] = useState(false);
  return (
    <article className={`message ${m.role}`} data-testid={`message-${m.role}`} data-status={streaming ? "streaming" : m.status}>
      <div className="role">
        {m.role === "user" ? "You" : "Assistant"}
        {m.role === "user" && !editing && (
          <button type="button" className="icon small" aria-label="Edit and resend" title="Edit and resend"
            disabled={!canEdit} onClick={() => setEditing(true)} data-testid="edit-message">✎</button>
        )}
      </div>
      {m.role === "user"
        ? editing ? <UserMessageEditor m={m} onDone={() => setEditing(false)} /> : <div className="user-text">{m.content}</div>
        : <Markdown text={m.content} />}
      {streaming && position !== null && position > 0 && <div className="queue" data-testid="queue-position">Waiting: {position} ahead in the queue</div>}
      {streaming && m.content === "" && position === null && <div className="typing">…</div>}
      {m.status === "error" && <div className="error">{m.error}</div>}
      {m.status === "stopped" && <div className="note">Stopped</div>}
      {m.stats && (
        <div className="stats" data-testid="message-stats">
          {m.stats.generatedTokens} tokens · {m.stats.tokensPerSecond.toFixed(1)} tok/s · TTFT {m.stats.ttftMs.toFixed(0)} ms
          {m.stats.queueMs > 1 ? ` · queued ${m.stats.queueMs.toFixed(0)} ms` : ""}
        </div>
      )}
    </article>
  );
}

/** The edit box: Enter (or "Save & resend") replaces the message and everything after it; Esc cancels. */
function UserMessageEditor({ m, onDone }: { m: Message; onDone: () => void }) {
  const editAndResend = useApp((s) => s.editAndResend);
  const [text, setText] = useState(m.content);
  const save = async () => {
    if (text.trim() && (await editAndResend(m.id, text))) onDone();
  };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void save();
    } else if (e.key === "Escape") {
      e.stopPropagation();
      onDone();
    }
  };
  return (
    <form className="edit-message" onSubmit={(e) => { e.preventDefault(); void save(); }}>
      <textarea autoFocus value={text} onChange={(e) => setText(e.target.value)} onKeyDown={onKeyDown} rows={3} aria-label="Edit message" />
      <div className="edit-buttons">
        <button type="submit" className="primary" disabled={!text.trim()}>Save &amp; resend</button>
        <button type="button" onClick={onDone}>Cancel</button>
      </div>
      <small>Later messages in this conversation are replaced by the new reply.</small>
    </form>
  );
}
