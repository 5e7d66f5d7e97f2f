// A chat whose reply ran out of context under the "stop" policy: says so and
// offers a new chat that carries a summary the model writes from this one,
// which the user reads and edits before the new chat starts.
import { useShallow } from "zustand/react/shallow";

import type { Conversation, Message } from "../../shared/app-contract.js";
import { useApp } from "../stores/store.js";

/** The latest reply ran into the end of the context (or was refused for it). */
export function contextFull(path: readonly Message[]): boolean {
  const last = path.at(-1);
  return last?.role === "assistant" && last.stats?.stopReason === "context" && last.status !== "streaming";
}

export function ContextFullBanner({ c }: { c: Conversation }) {
  const summarize = useApp((s) => s.summarize);
  const change = useApp((s) => s.changeSettings);
  const refused = c.settings.overflow === "stop";
  return (
    <div className="banner warn context-full" role="status" data-testid="context-full">
      <span>
        {refused
          ? "This chat has filled the model's context. Carry on in a new chat that starts from a summary of this one, or let this chat drop its oldest turns."
          : "The last reply filled the model's context. The next message leaves the oldest turns out of the prompt (they stay here)."}
      </span>
      <span className="banner-actions">
        <button type="button" className="primary" onClick={() => void summarize()}>New chat with a summary…</button>
        {refused && <button type="button" onClick={() => void change({ overflow: "shift" })}>Drop oldest turns instead</button>}
      </span>
    </div>
  );
}

export function SummaryDialog() {
  const { summary } = useApp(useShallow((s) => ({ summary: s.chatSummary })));
  const edit = useApp((s) => s.editSummary);
  const close = useApp((s) => s.closeSummary);
  const start = useApp((s) => s.continueWithSummary);
  const retry = useApp((s) => s.summarize);
  if (!summary) return null;
  return (
    <div className="summary-dialog card" role="dialog" aria-label="New chat with a summary" data-testid="summary-dialog">
      <h3>New chat with a summary</h3>
      {summary.state === "running" && <p className="note">The model is summarizing this chat…</p>}
      {summary.state === "failed" && <p className="error">The summary failed: {summary.error} You can write one yourself.</p>}
      <p className="hint-line">The new chat keeps this chat's settings; the summary goes into its system prompt. Edit it as you like.</p>
      <textarea rows={6} value={summary.text} onChange={(e) => edit(e.target.value)} aria-label="Summary" disabled={summary.state === "running"} />
      <div className="edit-buttons">
        <button type="button" className="primary" disabled={summary.state === "running" || !summary.text.trim()} onClick={() => void start()}>Start the new chat</button>
        {summary.state === "failed" && <button type="button" onClick={() => void retry()}>Try again</button>}
        <button type="button" onClick={() => void close()}>{summary.state === "running" ? "Stop" : "Cancel"}</button>
      </div>
    </div>
  );
}
