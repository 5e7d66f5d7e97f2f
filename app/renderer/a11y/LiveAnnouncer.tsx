// One polite live region for what happens out of sight: a reply starting and
// its text when it ends, a model loaded or failing, a download finished or
// failed. Screen readers read it; it is invisible otherwise.
import { useEffect, useState } from "react";

import { useApp, type AppState } from "../stores/store.js";

const maxSpoken = 600;

/** What changed between two states that is worth saying, or null. */
export function announcement(s: AppState, prev: AppState): string | null {
  if (prev.reply !== null && s.reply === null) {
    const m = s.messages.find((x) => x.id === prev.reply!.messageId);
    if (m) {
      const text = m.content.length > maxSpoken ? `${m.content.slice(0, maxSpoken)}…` : m.content;
      if (m.status === "error") return `The reply failed: ${m.error ?? "unknown error"}`;
      return m.status === "stopped" ? `Reply stopped: ${text}` : `Reply: ${text}`;
    }
  }
  if (prev.reply === null && s.reply !== null) return "The assistant is replying.";
  if (s.current && s.current.id !== prev.current?.id && s.loadingPath === null) return `${s.current.name} is loaded.`;
  if (s.modelsError && s.modelsError !== prev.modelsError) return s.modelsError;
  for (const d of s.downloads) {
    const before = prev.downloads.find((x) => x.id === d.id);
    if (before?.state === d.state) continue;
    if (d.state === "done") return `Download of ${d.name} finished.`;
    if (d.state === "failed") return `Download of ${d.name} failed: ${d.message ?? ""}`;
  }
  return null;
}

export function LiveAnnouncer() {
  const [text, setText] = useState("");
  useEffect(() => useApp.subscribe((s, prev) => {
    const said = announcement(s, prev);
    if (said !== null) setText(said);
  }), []);
  return <div className="sr-only" role="status" aria-live="polite" aria-atomic="true" data-testid="live-region">{text}</div>;
}
