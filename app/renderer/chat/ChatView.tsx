// The chat view: the conversation list, the thread (its active path, with the
// messages the model no longer sees marked), the context meter, the settings
// panel, the context-full banner and its summary dialog, and the composer.
import { useEffect, useRef, useState, type KeyboardEvent } from "react";
import { useShallow } from "zustand/react/shallow";

import { download } from "../common/format.js";
import { client } from "../transport/index.js";
import { useApp } from "../stores/store.js";
import { ContextFullBanner, SummaryDialog, contextFull } from "./ContextFull.js";
import { ContextMeter } from "./ContextMeter.js";
import { ConversationList } from "./ConversationList.js";
import { contextView } from "./context-view.js";
import { MessageView } from "./MessageView.js";
import { SettingsPanel } from "./SettingsPanel.js";

export function ChatView() {
  const { messages, reply, selectedId, conversations, chatError, current, summary, settingsForm } = useApp(useShallow((s) => ({
    messages: s.messages, reply: s.reply, selectedId: s.selectedId, conversations: s.conversations, chatError: s.chatError,
    current: s.current, summary: s.chatSummary, settingsForm: s.settingsForm,
  })));
  const send = useApp((s) => s.send);
  const stop = useApp((s) => s.stop);
  const regenerate = useApp((s) => s.regenerate);
  const saveSettings = useApp((s) => s.saveSettings);
  const clearError = useApp((s) => s.clearChatError);
  const [draft, setDraft] = useState("");
  const [showSettings, setShowSettings] = useState(false);
  const bottom = useRef<HTMLDivElement>(null);
  const conversation = conversations.find((c) => c.id === selectedId) ?? null;
  const busy = reply !== null || summary?.state === "running";
  const view = contextView(messages, current?.contextSize ?? null);

  useEffect(() => { bottom.current?.scrollIntoView({ block: "end" }); }, [messages]);
  useEffect(() => { void useApp.getState().loadPresets(); }, []);
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
  const toggleSettings = () => {
    if (showSettings) void saveSettings();
    setShowSettings(!showSettings);
  };

  return (
    <div className="chat">
      <ConversationList />
      <section className="thread">
        <header className="thread-head">
          <h2>{conversation?.title ?? "Chat"}</h2>
          <span className="model-tag">{current ? current.name : "no model loaded"}</span>
          <ContextMeter view={view} />
          {conversation && (
            <span className="head-tools">
              <button type="button" onClick={toggleSettings} aria-expanded={showSettings}>
                Settings{settingsForm !== null ? " ●" : ""}
              </button>
              <button type="button" onClick={() => void exportAs("markdown")}>Export .md</button>
              <button type="button" onClick={() => void exportAs("json")}>Export .json</button>
            </span>
          )}
        </header>
        {showSettings && conversation && <SettingsPanel c={conversation} />}
        <div className="messages" data-testid="messages">
          {messages.length === 0 && <p className="hint">Ask something. Enter sends, Shift+Enter adds a line, Esc stops a reply.</p>}
          {messages.map((m, i) => (
            <div key={m.id} className="message-slot">
              {i === view.firstInContext && i > 0 && (
                <div className="context-divider" data-testid="context-divider">
                  The model no longer sees the {i} message{i === 1 ? "" : "s"} above: they left its context (they stay in this chat).
                </div>
              )}
              <MessageView m={m} streaming={reply?.messageId === m.id} position={reply?.messageId === m.id ? reply.position : null}
                idle={!busy} inContext={i >= view.firstInContext} />
            </div>
          ))}
          <div ref={bottom} />
        </div>
        {conversation && contextFull(messages) && !summary && <ContextFullBanner c={conversation} />}
        <SummaryDialog />
        {chatError && <div className="banner error" role="alert">{chatError} <button type="button" className="small" onClick={clearError}>Dismiss</button></div>}
        <div className="composer">
          <textarea value={draft} onChange={(e) => setDraft(e.target.value)} onKeyDown={onKeyDown} rows={3}
            placeholder={current ? "Message (Enter to send, Shift+Enter for a new line)" : "Load a model on the Models page first"} aria-label="Message" />
          <div className="composer-buttons">
            {reply !== null
              ? <button type="button" className="danger" onClick={() => void stop()} data-testid="stop">Stop (Esc)</button>
              : <button type="button" className="primary" onClick={() => void submit()} disabled={!draft.trim() || busy} data-testid="send">Send</button>}
            <button type="button" onClick={() => void regenerate()} disabled={busy || messages.length === 0} data-testid="regenerate">Regenerate</button>
          </div>
        </div>
      </section>
    </div>
  );
}
