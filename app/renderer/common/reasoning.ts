// A reply's reasoning, shown collapsed above the answer; while it is still
// open the model is thinking. Both ways models write it, `<think>…</think>`
// and gpt-oss's harmony channels, are read by the parser the main process
// shares (app/shared/reply-channels.ts).
import { splitReply, type ReplyParts, type SplitOptions } from "../../shared/reply-channels.js";

export type { ReplyParts } from "../../shared/reply-channels.js";

/** The reply's parts; pass `complete` once the reply has ended, so that nothing is held back as a marker's start. */
export function splitReasoning(text: string, options: SplitOptions = {}): ReplyParts {
  const { reasoning, thinking, answer } = splitReply(text, options);
  return { reasoning, thinking, answer };
}
