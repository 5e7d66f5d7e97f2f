// One message of the thread: your message (edit-and-resend, a hand edit) or a
// reply (markdown, its reasoning collapsed, the model that wrote it, queue
// position, status, stop reason and stats). Every message can be copied and
// edited; a turn with several versions shows ‹ i/n › to flip between them.
import { memo, useState, type KeyboardEvent } from "react";

import type { Message } from "../../shared/app-contract.js";
import { copyText } from "../common/clipboard.js";
import { Markdown, StreamingMarkdown } from "../common/Markdown.js";
import { draftFiguresText } from "../../shared/speculative-stats.js";
import { splitReasoning } from "../common/reasoning.js";
import { useApp } from "../stores/store.js";
import { stopReasonLabel } from "./context-view.js";

interface Props {
  m: Message;
  streaming: boolean;
  position: number | null;
  /** False while a reply runs: editing, regenerating and switching would have to stop it first. */
  idle: boolean;
  /** False for a message the latest reply's prompt no longer held (context shift). */
  inContext: boolean;
}

/** Memoized: a streamed token re-renders its own message, not the whole thread's markdown. */
export const MessageView = memo(function MessageView({ m, streaming, position, idle, inContext }: Props) {
  const [editing, setEditing] = useState(false);
  const regenerate = useApp((s) => s.regenerate);
  const mine = m.role === "user";
  return (
    <article className={`message ${m.role}${inContext ? "" : " out-of-context"}`} data-testid={`message-${m.role}`}
      data-status={streaming ? "streaming" : m.status} data-in-context={inContext}>
      <div className="role">
        <span>{mine ? "You" : "Assistant"}</span>
        {!mine && m.model && <span className="message-model" data-testid="message-model" title="The model that wrote this reply">{m.model}</span>}
        {m.edited && <span className="edited-tag">edited</span>}
        <span className="message-tools">
          <BranchNav m={m} idle={idle} />
          <CopyButton text={m.content} />
          {!editing && (
            <button type="button" className="icon small" aria-label={mine ? "Edit and resend" : "Edit reply"} title={mine ? "Edit and resend" : "Edit this reply"}
              disabled={!idle} onClick={() => setEditing(true)} data-testid="edit-message">✎</button>
          )}
          {!mine && (
            <button type="button" className="icon small" aria-label="Regenerate reply" title="Write a new version of this reply"
              disabled={!idle} onClick={() => void regenerate(m.id)}>↻</button>
          )}
        </span>
      </div>
      {editing ? <MessageEditor m={m} onDone={() => setEditing(false)} />
        : mine ? <div className="user-text">{m.content}</div> : <ReplyBody text={m.content} streaming={streaming} />}
      {streaming && position !== null && position > 0 && <div className="queue" data-testid="queue-position">Waiting: {position} ahead in the queue</div>}
      {streaming && m.content === "" && position === null && <div className="typing">…</div>}
      {m.status === "error" && <div className="error">{m.error}</div>}
      {m.status === "stopped" && <div className="note">Stopped</div>}
      {m.stats && (
        <div className="stats" data-testid="message-stats">
          {m.stats.generatedTokens} tokens · {m.stats.tokensPerSecond.toFixed(1)} tok/s
          <DraftStats stats={m.stats} /> · TTFT {m.stats.ttftMs.toFixed(0)} ms
          {m.stats.queueMs > 1 ? ` · queued ${m.stats.queueMs.toFixed(0)} ms` : ""}
          <span className={`stop-reason stop-${m.stats.stopReason}`} data-testid="stop-reason"> · stop: {stopReasonLabel(m.stats.stopReason)}</span>
        </div>
      )}
    </article>
  );
});

/** Beside tok/s, when the model's MTP block drafted: how many drafts were accepted and the tokens per verifier pass. */
function DraftStats({ stats }: { stats: NonNullable<Message["stats"]> }) {
  const text = draftFiguresText(stats);
  if (text === null) return null;
  return (
    <span className="draft-stats" data-testid="draft-stats"
      title="Speculative decoding: the model's MTP block drafted tokens that one verifier pass checked together">
      {` · ${text}`}
    </span>
  );
}

/**
 * A reply: its reasoning (a `<think>` block or harmony's analysis) collapsed above the answer, open while the model is still thinking.
 * While it streams, each part renders block by block (StreamingMarkdown: only the open block again per update); once complete, whole,
 * as a stored reply does.
 */
function ReplyBody({ text, streaming }: { text: string; streaming: boolean }) {
  const parts = splitReasoning(text, { complete: !streaming });
  const Md = streaming ? StreamingMarkdown : Markdown;
  return (
    <>
      {parts.reasoning !== null && (
        <details className="reasoning" open={parts.thinking && streaming} data-testid="reasoning">
          <summary>{parts.thinking && streaming ? "Thinking…" : "Reasoning"}</summary>
          <Md text={parts.reasoning} className="reasoning-text" />
        </details>
      )}
      <Md text={parts.answer} />
    </>
  );
}

function BranchNav({ m, idle }: { m: Message; idle: boolean }) {
  const switchBranch = useApp((s) => s.switchBranch);
  const count = m.siblingIds.length;
  if (count < 2) return null;
  const i = m.siblingIds.indexOf(m.id);
  const go = (j: number) => { const id = m.siblingIds[j]; if (id) void switchBranch(id); };
  return (
    <span className="branch-nav" data-testid="branch-nav">
      <button type="button" className="icon small" aria-label="Previous version" disabled={!idle || i <= 0} onClick={() => go(i - 1)}>‹</button>
      <span className="branch-count">{i + 1}/{count}</span>
      <button type="button" className="icon small" aria-label="Next version" disabled={!idle || i >= count - 1} onClick={() => go(i + 1)}>›</button>
    </span>
  );
}

function CopyButton({ text }: { text: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  const copy = () => {
    copyText(text).then(() => setState("copied"), () => setState("failed")).finally(() => setTimeout(() => setState("idle"), 1500));
  };
  return (
    <button type="button" className="icon small" aria-label="Copy text" title="Copy the message's text" onClick={copy} data-testid="copy-message">
      {state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : "Copy"}
    </button>
  );
}

/**
 * The edit box. Your message: Enter (or "Save & resend") makes a new version
 * and a new reply; "Save only" keeps it without a reply. A reply: Save makes a
 * new version written by hand. The old version stays (‹ 1/2 ›). Esc cancels.
 */
function MessageEditor({ m, onDone }: { m: Message; onDone: () => void }) {
  const editAndResend = useApp((s) => s.editAndResend);
  const editMessage = useApp((s) => s.editMessage);
  const [text, setText] = useState(m.content);
  const mine = m.role === "user";
  const resend = async () => { if (text.trim() && (await editAndResend(m.id, text))) onDone(); };
  const keep = async () => { if (text.trim() && (await editMessage(m.id, text))) onDone(); };
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing && mine) {
      e.preventDefault();
      void resend();
    } else if (e.key === "Escape") {
      e.stopPropagation();
      onDone();
    }
  };
  return (
    <form className="edit-message" onSubmit={(e) => { e.preventDefault(); void (mine ? resend() : keep()); }}>
      <textarea autoFocus value={text} onChange={(e) => setText(e.target.value)} onKeyDown={onKeyDown} rows={mine ? 3 : 8} aria-label="Edit message" />
      <div className="edit-buttons">
        <button type="submit" className="primary" disabled={!text.trim()}>{mine ? "Save & resend" : "Save version"}</button>
        {mine && <button type="button" disabled={!text.trim()} onClick={() => void keep()}>Save only</button>}
        <button type="button" onClick={onDone}>Cancel</button>
      </div>
      <small>The current version stays: flip back to it with ‹ ›.</small>
    </form>
  );
}
