// Context shift: which part of a chat's history goes into the prompt so that
// the prompt and room for a reply fit in the model's context. The system
// prompt always stays; whole turns (a user message and what followed it) are
// dropped from the oldest on, never the turn being answered. The stored
// history is not touched: only the prompt is shorter. Token counts come from
// the model's own chat template (RuntimeHost.chatPromptTokens), so the
// arithmetic is exact; a binary search keeps the number of renders at
// about log2(turns).
import type { ChatMessage } from "../../shared/runtime-contract.js";
import type { OverflowPolicy } from "../../shared/chat-settings.js";

/** The room a reply is promised when the chat sets no max tokens: a quarter of the context, from 16 to 2048 tokens. */
export function defaultReplyReserve(contextSize: number): number {
  return Math.max(16, Math.min(2048, Math.floor(contextSize / 4)));
}

/** The room kept for the reply: max tokens when set (at most half the context, so a large cap does not empty the prompt). */
export function replyReserve(contextSize: number, maxTokens: number | null): number {
  const half = Math.max(1, Math.floor(contextSize / 2));
  return maxTokens === null ? Math.min(defaultReplyReserve(contextSize), half) : Math.min(maxTokens, half);
}

/**
 * A prompt whose last turn leaves less than this much room for a reply is
 * refused rather than sent: the reply could not say anything.
 */
export function minimumReplyRoom(contextSize: number): number {
  return Math.max(1, Math.min(64, Math.floor(contextSize / 8)));
}

export type FitResult =
  /** `start`: index of the first history message in the prompt (0 = all of it). */
  | { kind: "fits"; tokens: number[]; start: number }
  /** Policy "stop": the whole history does not fit with room for a reply. */
  | { kind: "full"; promptTokens: number }
  /** Even the system prompt and the last turn alone leave no room for a reply. */
  | { kind: "too_long"; promptTokens: number };

export interface FitOptions {
  contextSize: number;
  /** Tokens kept free for the reply (replyReserve). */
  reserve: number;
  policy: OverflowPolicy;
}

/** Renders messages into prompt tokens (the model's chat template). */
export type PromptCounter = (messages: ChatMessage[]) => Promise<number[]>;

/**
 * Chooses the prompt for a reply to `history` (oldest first, ending with the
 * turn to answer) under `systemPrompt` ("" = none).
 */
export async function fitHistory(
  systemPrompt: string, history: readonly ChatMessage[], options: FitOptions, render: PromptCounter,
): Promise<FitResult> {
  const budget = options.contextSize - options.reserve;
  const starts = turnStarts(history);
  const cache = new Map<number, number[]>();
  const tokensFrom = async (start: number): Promise<number[]> => {
    let tokens = cache.get(start);
    if (!tokens) {
      tokens = await render(promptFrom(systemPrompt, history, start));
      cache.set(start, tokens);
    }
    return tokens;
  };
  const all = await tokensFrom(0);
  if (all.length <= budget) return { kind: "fits", tokens: all, start: 0 };
  if (options.policy === "stop") return { kind: "full", promptTokens: all.length };
  // Fewer turns never make a longer prompt, so the first start that fits is found by bisection.
  const last = starts.length - 1;
  const shortest = await tokensFrom(starts[last]!);
  if (shortest.length > budget) {
    // Only the turn being answered is left: send it if a reply still has some room.
    if (shortest.length + minimumReplyRoom(options.contextSize) <= options.contextSize)
      return { kind: "fits", tokens: shortest, start: starts[last]! };
    return { kind: "too_long", promptTokens: shortest.length };
  }
  let lo = 0;      // starts[lo] does not fit (the whole history, above)
  let hi = last;   // starts[hi] fits
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if ((await tokensFrom(starts[mid]!)).length <= budget) hi = mid;
    else lo = mid;
  }
  return { kind: "fits", tokens: await tokensFrom(starts[hi]!), start: starts[hi]! };
}

/** The indices where turns begin: 0, then every user message after it. */
export function turnStarts(history: readonly ChatMessage[]): number[] {
  const starts = [0];
  history.forEach((m, i) => { if (i > 0 && m.role === "user") starts.push(i); });
  return starts;
}

function promptFrom(systemPrompt: string, history: readonly ChatMessage[], start: number): ChatMessage[] {
  const kept = history.slice(start);
  return systemPrompt.trim() ? [{ role: "system", content: systemPrompt }, ...kept] : kept;
}
