// What the context meter and the "out of context" marks show, from what the
// replies on the path already stored: the latest reply's prompt + generated
// tokens against the context (the loaded model's, else the one it was written
// under), and the first message that reply's prompt still held.
import type { Message } from "../../shared/app-contract.js";
import type { StopReason } from "../../shared/runtime-contract.js";

export interface ContextView {
  used: number;
  /** 0 when nothing says (no model loaded, no reply yet). */
  limit: number;
  /** Index in the path of the first message the latest reply saw (0: all of them). */
  firstInContext: number;
}

export function contextView(path: readonly Message[], modelContext: number | null): ContextView {
  const latest = [...path].reverse().find((m) => m.role === "assistant" && m.stats !== null && m.status !== "streaming");
  const stats = latest?.stats ?? null;
  const limit = modelContext ?? stats?.contextSize ?? 0;
  // A refused prompt generated nothing and may be over the limit: that is the point of showing it.
  const used = stats === null ? 0 : latest!.status === "error" ? stats.promptTokens
    : Math.min(stats.promptTokens + stats.generatedTokens, stats.contextSize || Infinity);
  const from = latest?.contextFrom ? path.findIndex((m) => m.id === latest.contextFrom) : -1;
  return { used, limit, firstInContext: Math.max(0, from) };
}

/** How a reply ended, in words (with the runtime's name for it). */
export function stopReasonLabel(reason: StopReason): string {
  switch (reason) {
    case "eos": return "finished (eos)";
    case "length": return "max tokens reached (length)";
    case "context": return "context full (context)";
    case "cancel": return "stopped";
    case "stop": return "stop string (stop)";
  }
}
