// A reply's speculative-decoding figures as the app shows them (the chat's stats line, the Markdown
// export): shown only when drafts were made (docs/SPECULATIVE.md).
import type { MessageStats } from "./app-contract.js";

export interface DraftFigures {
  /** Accepted / drafted, 0..1. */
  acceptanceRate: number;
  /** Generated tokens per verifier pass (1 without drafts). */
  tokensPerWindow: number;
}

/** The figures of a reply whose windows had drafts; null when none were drafted (or they were not recorded). */
export function draftFigures(s: Pick<MessageStats, "generatedTokens" | "draftTokens" | "acceptedDraftTokens" | "windows">): DraftFigures | null {
  const drafted = s.draftTokens ?? 0;
  const windows = s.windows ?? 0;
  if (drafted <= 0 || windows <= 0) return null;
  return { acceptanceRate: (s.acceptedDraftTokens ?? 0) / drafted, tokensPerWindow: s.generatedTokens / windows };
}

/** "62% of drafts accepted · 1.83 tokens/window", or null when nothing was drafted. */
export function draftFiguresText(s: Pick<MessageStats, "generatedTokens" | "draftTokens" | "acceptedDraftTokens" | "windows">): string | null {
  const f = draftFigures(s);
  if (f === null) return null;
  return `${Math.round(f.acceptanceRate * 100)}% of drafts accepted · ${f.tokensPerWindow.toFixed(2)} tokens/window`;
}
