// A reply's reasoning: the `<think>…</think>` block reasoning models write
// before their answer (also when the chat template opened it, so only the
// closing tag is in the text). Shown collapsed above the answer; while the
// block is still open the model is thinking.
export interface ReplyParts {
  /** The reasoning text, or null when the reply has none. */
  reasoning: string | null;
  /** The reasoning block has not been closed yet (still streaming). */
  thinking: boolean;
  answer: string;
}

export function splitReasoning(text: string): ReplyParts {
  const open = /^\s*<think>/.exec(text);
  const close = text.indexOf("</think>");
  if (open) {
    const body = text.slice(open[0].length);
    const end = body.indexOf("</think>");
    if (end < 0) return { reasoning: body.trim(), thinking: true, answer: "" };
    return { reasoning: body.slice(0, end).trim(), thinking: false, answer: body.slice(end + "</think>".length).replace(/^\s+/, "") };
  }
  if (close >= 0 && !text.slice(0, close).includes("<think>"))
    return { reasoning: text.slice(0, close).trim(), thinking: false, answer: text.slice(close + "</think>".length).replace(/^\s+/, "") };
  return { reasoning: null, thinking: false, answer: text };
}
