// A reply's reasoning and answer, for the two ways models write them:
//   - `<think>…</think>` before the answer (also when the chat template opened
//     the block, so that only `</think>` is in the text);
//   - OpenAI's harmony format (gpt-oss): messages on channels, each
//     `<|channel|>NAME<|message|>TEXT<|end|>`, the next one after
//     `<|start|>assistant`, the last one ended by `<|return|>` (or `<|call|>`
//     for a tool call). The text starts right after the prompt's
//     `<|start|>assistant`. `analysis` is the chain of thought, `commentary`
//     preambles and tool calls (` to=functions.NAME` in the header), `final`
//     the answer.
// One parser for the chat view (reasoning collapsed above the answer), the
// chat's history and summaries (reasoning left out) and the OpenAI-compatible API
// (reasoning_content apart from content). A streaming reply can stop anywhere,
// in a header or halfway through a control token: unless the text is complete,
// a tail that could still become a control token is held back, so that no
// part of one ever shows. Pure TypeScript: no Node, no DOM.

export interface ReplyParts {
  /** The reasoning text, or null when the reply has none. */
  reasoning: string | null;
  /** The reasoning is still open (streaming): no answer has begun yet. */
  thinking: boolean;
  answer: string;
}

/**
 * How a reply is written: "plain" (no reasoning: the answer is the text as
 * it is), "think", "harmony", or "pending" while a streaming reply's first
 * characters could still become either marker.
 */
export type ReplyFormat = "plain" | "think" | "harmony" | "pending";

export interface ReplyChannels extends ReplyParts {
  format: ReplyFormat;
}

export interface SplitOptions {
  /**
   * The text is the whole reply (not still streaming): nothing is held back
   * as the possible start of a marker. Default false.
   */
  complete?: boolean;
}

const thinkOpen = "<think>";
const thinkClose = "</think>";

/** Harmony's control tokens: they frame messages and never show. */
const harmonyTokens = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>", "<|endoftext|>"] as const;
type HarmonyToken = (typeof harmonyTokens)[number];
/** The tokens a generated harmony reply can begin with. */
const harmonyOpeners: readonly string[] = ["<|channel|>", "<|start|>", "<|message|>"];

/** True when `text` is a proper, non-empty prefix of `marker` (a marker not yet complete). */
function startsMarker(text: string, marker: string): boolean {
  return text.length > 0 && text.length < marker.length && marker.startsWith(text);
}

/** Length of the longest suffix of `text` that is a proper prefix of one of `markers`. */
function partialTail(text: string, markers: readonly string[]): number {
  let longest = 0;
  for (const m of markers)
    for (let n = Math.min(m.length - 1, text.length); n > longest; n--)
      if (text.endsWith(m.slice(0, n))) {
        longest = n;
        break;
      }
  return longest;
}

/**
 * How `text` is written (see {@link ReplyFormat}), from how it begins: a
 * reply that merely mentions `<think>` or a harmony token later on is plain.
 * The one exception is `</think>` without its opening tag: the template wrote
 * that into the prompt.
 */
export function replyFormat(text: string, options: SplitOptions = {}): ReplyFormat {
  const start = text.replace(/^\s+/, "");
  if (start.startsWith(thinkOpen)) return "think";
  if (harmonyOpeners.some((t) => start.startsWith(t))) return "harmony";
  if (!options.complete && (start === "" || startsMarker(start, thinkOpen) || harmonyOpeners.some((t) => startsMarker(start, t)))) return "pending";
  const close = text.indexOf(thinkClose);
  if (close >= 0 && !text.slice(0, close).includes(thinkOpen)) return "think";
  return "plain";
}

/** Splits a reply into its reasoning and its answer, control tokens and markers removed. */
export function splitReply(text: string, options: SplitOptions = {}): ReplyChannels {
  const format = replyFormat(text, options);
  switch (format) {
    case "plain":
      return { format, reasoning: null, thinking: false, answer: text };
    case "pending":
      return { format, reasoning: null, thinking: false, answer: "" };
    case "think":
      return { format, ...splitThink(text, options.complete ?? false) };
    case "harmony":
      return { format, ...splitHarmony(text, options.complete ?? false) };
  }
}

/**
 * The text without its reasoning, for what is read back as the reply (a
 * summary's transcript, the history a harmony template reads): a harmony reply
 * is its final answer; `<think>` blocks are removed wherever they are.
 */
export function withoutReasoning(text: string): string {
  const parts = splitReply(text, { complete: true });
  if (parts.format === "harmony") return parts.answer;
  const rest = parts.format === "think" ? parts.answer : text;
  return rest.replace(/<think>[\s\S]*?(<\/think>|$)/g, "");
}

function splitThink(text: string, complete: boolean): ReplyParts {
  const open = /^\s*<think>/.exec(text);
  if (open) {
    const body = text.slice(open[0].length);
    const end = body.indexOf(thinkClose);
    if (end < 0) {
      const held = complete ? 0 : partialTail(body, [thinkClose]);
      return { reasoning: body.slice(0, body.length - held).trim(), thinking: true, answer: "" };
    }
    return { reasoning: body.slice(0, end).trim(), thinking: false, answer: body.slice(end + thinkClose.length).replace(/^\s+/, "") };
  }
  // The template opened the block: everything before its end is reasoning.
  const close = text.indexOf(thinkClose);
  return { reasoning: text.slice(0, close).trim(), thinking: false, answer: text.slice(close + thinkClose.length).replace(/^\s+/, "") };
}

/** One harmony message: its header (role, recipient, channel, constraint) and its text. */
interface HarmonyMessage {
  /** What precedes `<|channel|>`: the role, maybe ` to=RECIPIENT`. */
  role: string;
  /** What follows `<|channel|>` (null: no channel given), maybe ` to=RECIPIENT`. */
  channel: string | null;
  /** What follows `<|constrain|>` (the arguments' format, e.g. json). */
  constraint: string | null;
  /** null while the header is still being read (before `<|message|>`). */
  body: string | null;
}

/**
 * Reads harmony text as its messages, and whether generation ended
 * (`<|return|>`, `<|call|>`). Text between two messages (after an end,
 * before `<|start|>`) is taken as a header the model wrote without its
 * `<|start|>`; a `<|channel|>` in a body, as a new message whose end and
 * start were left out.
 */
function harmonyMessages(text: string, complete: boolean): { messages: HarmonyMessage[]; ended: boolean } {
  const messages: HarmonyMessage[] = [];
  // Set by begin() too, so declared wide: narrowing would not see that.
  let current = null as HarmonyMessage | null;
  let field: "role" | "channel" | "constraint" = "role";
  let ended = false;
  const begin = (): HarmonyMessage => {
    const m: HarmonyMessage = { role: "", channel: null, constraint: null, body: null };
    messages.push(m);
    current = m;
    field = "role";
    return m;
  };
  const literal = (s: string) => {
    if (s === "" || (current === null && s.trim() === "")) return;
    const m: HarmonyMessage = current ?? begin();
    if (m.body !== null) m.body += s;
    else if (field === "role") m.role += s;
    else if (field === "channel") m.channel = (m.channel ?? "") + s;
    else m.constraint = (m.constraint ?? "") + s;
  };

  let at = 0;
  for (;;) {
    const next = firstToken(text, at);
    if (next === null) {
      // While streaming, a tail that could still grow into a token is held back.
      const rest = text.slice(at);
      literal(complete ? rest : rest.slice(0, rest.length - partialTail(rest, harmonyTokens)));
      break;
    }
    literal(text.slice(at, next.at));
    at = next.at + next.token.length;
    const m: HarmonyMessage | null = current;
    switch (next.token) {
      case "<|start|>":
        begin();
        break;
      case "<|channel|>": {
        const h = m === null || m.body !== null ? begin() : m;
        h.channel ??= "";
        field = "channel";
        break;
      }
      case "<|constrain|>":
        if (m !== null && m.body === null) {
          m.constraint ??= "";
          field = "constraint";
        }
        break;
      case "<|message|>":
        // Without a header (the prompt wrote it), the channel is unknown.
        (m ?? begin()).body ??= "";
        break;
      default:
        // <|end|>, <|return|>, <|call|>, <|endoftext|>: the message is over.
        if (m !== null) m.body ??= "";
        current = null;
        if (next.token !== "<|end|>") ended = true;
        break;
    }
  }
  return { messages, ended };
}

/** The earliest harmony token at or after `from`. */
function firstToken(text: string, from: number): { at: number; token: HarmonyToken } | null {
  for (let i = text.indexOf("<|", from); i >= 0; i = text.indexOf("<|", i + 1)) {
    const token = harmonyTokens.find((t) => text.startsWith(t, i));
    if (token !== undefined) return { at: i, token };
  }
  return null;
}

/** The channel a header names (its first word), and the recipient of a tool call (` to=functions.NAME`), if any. */
function headerOf(m: HarmonyMessage): { channel: string | null; recipient: string | null } {
  const recipient = /(?:^|\s)to=(\S+)/.exec(`${m.role} ${m.channel ?? ""}`)?.[1] ?? null;
  const channel = m.channel?.trim().split(/\s+/)[0] || null;
  return { channel, recipient };
}

function splitHarmony(text: string, complete: boolean): ReplyParts {
  const { messages, ended } = harmonyMessages(text, complete);
  const reasoning: string[] = [];
  const answer: string[] = [];
  let hasReasoning = false;
  let answering = false;
  for (const m of messages) {
    if (m.body === null) continue; // a header still being read: nothing to show yet
    const { channel, recipient } = headerOf(m);
    if (channel === null || channel === "final") {
      answering = true;
      answer.push(m.body.trim());
      continue;
    }
    // analysis, commentary (a preamble, or a tool call: shown, not run), or a channel this parser does not know
    hasReasoning = true;
    const constraint = m.constraint?.trim() ? ` (${m.constraint.trim()})` : "";
    reasoning.push(recipient !== null ? `Tool call to ${recipient}${constraint}: ${m.body.trim()}`.trim() : m.body.trim());
  }
  // Parts join with a blank line; an empty one (a body just begun) adds none, so a streaming text only grows.
  const join = (parts: string[]) => parts.filter((p) => p !== "").join("\n\n");
  return { reasoning: hasReasoning ? join(reasoning) : null, thinking: !answering && !ended, answer: join(answer) };
}
