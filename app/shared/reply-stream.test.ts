// The streaming reply (reply-stream.ts): its increments of reasoning and answer
// add up to what the parser makes of the whole reply, however the text is cut,
// never taking anything back or sending a piece of a control token; a plain
// reply passes through exactly as its pieces came.
import { describe, expect, it } from "vitest";

import { splitReply } from "./reply-channels.js";
import { ReplyStream, type ReplyDelta } from "./reply-stream.js";

const harmony = "<|channel|>analysis<|message|>The user greets. Reply briefly.<|end|>" +
  "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>";
const tokens = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>", "<|endoftext|>"];

/** Streams `pieces` and gathers the increments per channel (and every increment, in order). */
function stream(pieces: readonly string[]): { reasoning: string; answer: string; deltas: ReplyDelta[] } {
  const s = new ReplyStream();
  const deltas: ReplyDelta[] = [];
  for (const p of pieces) deltas.push(...s.push(p));
  deltas.push(...s.end());
  const join = (channel: ReplyDelta["channel"]) => deltas.filter((d) => d.channel === channel).map((d) => d.text).join("");
  return { reasoning: join("reasoning"), answer: join("answer"), deltas };
}

/** Every way of cutting `text` into pieces of `size` characters, from each offset. */
function cuts(text: string, size: number): string[][] {
  return Array.from({ length: size }, (_, offset) => {
    const pieces = offset > 0 ? [text.slice(0, offset)] : [];
    for (let i = offset; i < text.length; i += size) pieces.push(text.slice(i, i + size));
    return pieces;
  });
}

describe("ReplyStream", () => {
  it("adds up to the whole reply's reasoning and answer, however the text is cut, and never sends part of a control token", () => {
    const replies = [
      harmony,
      harmony.replace("<|return|>", ""),
      "<|channel|>analysis<|message|>a<b <|c d<|end|><|start|>assistant<|channel|>commentary to=functions.x <|constrain|>json<|message|>{}<|call|>",
      "<think>\nA, then B.\n</think>\n\nThe answer.",
      "<think>still open",
    ];
    for (const text of replies) {
      const whole = splitReply(text, { complete: true });
      for (const size of [1, 2, 3, 7])
        for (const pieces of cuts(text, size)) {
          const got = stream(pieces);
          expect(got.reasoning, JSON.stringify(pieces)).toBe(whole.reasoning ?? "");
          expect(got.answer, JSON.stringify(pieces)).toBe(whole.answer);
          // Increments are only appended, and add up to text with no control token in it: none was ever sent, not even in part.
          for (const d of got.deltas) expect(tokens.some((t) => d.text.includes(t)), d.text).toBe(false);
        }
    }
  });

  it("streams reasoning before the answer has begun, and the answer as it comes", () => {
    const s = new ReplyStream();
    expect(s.push("<|channel|>analysis<|message|>Think")).toEqual([{ channel: "reasoning", text: "Think" }]);
    expect(s.push("ing<|en")).toEqual([{ channel: "reasoning", text: "ing" }]);
    expect(s.push("d|><|start|>assistant<|channel|>final<|message|>")).toEqual([]);
    expect(s.push("Hi")).toEqual([{ channel: "answer", text: "Hi" }]);
    expect(s.push("!<|return|>")).toEqual([{ channel: "answer", text: "!" }]);
    expect(s.end()).toEqual([]);
  });

  it("passes a plain reply through piece by piece, exactly as it came, also the pieces it waited on", () => {
    const pieces = ["\n", "<", "b>bold</b>", " and <", "|x"];
    expect(stream(pieces).deltas).toEqual(pieces.map((text) => ({ channel: "answer", text })));
    expect(stream(["  ", "<th"]).deltas).toEqual([{ channel: "answer", text: "  " }, { channel: "answer", text: "<th" }]);
    // a </think> the prompt opened cannot be told while streaming: the reply streams as plain text
    expect(stream(["why", "</think>", "Because."]).deltas.map((d) => d.channel)).toEqual(["answer", "answer", "answer"]);
  });
});
