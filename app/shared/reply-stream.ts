// A streaming reply as increments of its reasoning and of its answer (the
// OpenAI-compatible API's delta.reasoning_content and delta.content). Each
// piece of text is added as it comes; what comes out is only ever appended
// to, never taken back: the parser (reply-channels.ts) holds back a tail that
// could still become a marker or a control token, and a reply is read as
// plain, `<think>` or harmony from how it begins, decided once.
//
// A plain reply passes through untouched, one increment per piece, exactly
// as the pieces came: pieces that might have begun a marker (leading
// whitespace, a `<`) wait until the text shows it is plain, then go out one
// by one. Only a `</think>` the template opened in the prompt cannot be told
// apart while streaming (nothing before it says it is reasoning): such a
// reply streams as plain text.
import { replyFormat, splitReply } from "./reply-channels.js";

export interface ReplyDelta {
  channel: "reasoning" | "answer";
  text: string;
}

export class ReplyStream {
  private text = "";
  private mode: "pending" | "plain" | "split" = "pending";
  /** The pieces of a reply whose format is not known yet. */
  private held: string[] = [];
  private sentReasoning = "";
  private sentAnswer = "";

  /** Adds a piece of the reply; returns what it adds to the reasoning and the answer. */
  push(piece: string): ReplyDelta[] {
    if (piece === "") return [];
    this.text += piece;
    if (this.mode === "plain") return [{ channel: "answer", text: piece }];
    if (this.mode === "pending") {
      const format = replyFormat(this.text);
      if (format === "pending") {
        this.held.push(piece);
        return [];
      }
      if (format === "plain" || (format === "think" && !this.opensThink())) return this.releasePlain(piece);
      this.mode = "split";
      this.held = [];
    }
    return this.increments(false);
  }

  /** The reply has ended: whatever was held back. */
  end(): ReplyDelta[] {
    if (this.mode === "pending") return this.releasePlain(null);
    if (this.mode === "plain") return [];
    return this.increments(true);
  }

  /** The text opens its reasoning with `<think>` (rather than only closing one the prompt opened). */
  private opensThink(): boolean {
    return /^\s*<think>/.test(this.text);
  }

  private releasePlain(piece: string | null): ReplyDelta[] {
    this.mode = "plain";
    const pieces = piece === null ? this.held : [...this.held, piece];
    this.held = [];
    return pieces.map((text) => ({ channel: "answer", text }));
  }

  private increments(complete: boolean): ReplyDelta[] {
    const parts = splitReply(this.text, { complete });
    const out: ReplyDelta[] = [];
    const reasoning = parts.reasoning ?? "";
    // The parser only ever extends what it returned before; a text that did not would send nothing rather than something wrong.
    if (reasoning.length > this.sentReasoning.length && reasoning.startsWith(this.sentReasoning)) {
      out.push({ channel: "reasoning", text: reasoning.slice(this.sentReasoning.length) });
      this.sentReasoning = reasoning;
    }
    if (parts.answer.length > this.sentAnswer.length && parts.answer.startsWith(this.sentAnswer)) {
      out.push({ channel: "answer", text: parts.answer.slice(this.sentAnswer.length) });
      this.sentAnswer = parts.answer;
    }
    return out;
  }
}
