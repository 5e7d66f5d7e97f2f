// The reply parser (reply-channels.ts): `<think>` and harmony (gpt-oss)
// replies, whole and cut anywhere while streaming, plain replies untouched.
import { describe, expect, it } from "vitest";

import { replyFormat, splitReply, withoutReasoning, type ReplyParts } from "./reply-channels.js";

const parts = (text: string, complete = false): ReplyParts => {
  const { reasoning, thinking, answer } = splitReply(text, { complete });
  return { reasoning, thinking, answer };
};

/** A gpt-oss reply as the model writes it after the prompt's `<|start|>assistant`. */
const harmony = "<|channel|>analysis<|message|>The user greets. Reply briefly.<|end|>" +
  "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>";

const tokens = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>", "<|endoftext|>"];
/** True when the text holds a control token, or ends with the start of one (`<|chan`). */
function showsControl(text: string): boolean {
  if (tokens.some((t) => text.includes(t))) return true;
  return tokens.some((t) => Array.from({ length: t.length - 1 }, (_, i) => t.slice(0, i + 2)).some((p) => text.endsWith(p)));
}

describe("splitReply: <think>", () => {
  it("takes a leading block apart from the answer, open or closed, and a block the template opened", () => {
    expect(parts("<think>\nfirst A, then B\n</think>\n\nThe answer.")).toEqual({ reasoning: "first A, then B", thinking: false, answer: "The answer." });
    expect(parts("  <think>still going")).toEqual({ reasoning: "still going", thinking: true, answer: "" });
    expect(parts("weighing it</think>Yes.")).toEqual({ reasoning: "weighing it", thinking: false, answer: "Yes." });
    expect(parts("No reasoning <think> here")).toEqual({ reasoning: null, thinking: false, answer: "No reasoning <think> here" });
  });

  it("holds back a half-written tag while streaming, and shows it once the reply is complete", () => {
    expect(parts("<thi")).toEqual({ reasoning: null, thinking: false, answer: "" });
    expect(parts("<thi", true)).toEqual({ reasoning: null, thinking: false, answer: "<thi" });
    expect(parts("<think>so</thi")).toEqual({ reasoning: "so", thinking: true, answer: "" });
    expect(parts("<think>a < b")).toEqual({ reasoning: "a < b", thinking: true, answer: "" });
    expect(replyFormat("\n\n")).toBe("pending");
    expect(replyFormat("\n\n", { complete: true })).toBe("plain");
  });

  it("leaves a plain reply exactly as it is", () => {
    for (const text of ["Hello", " two  spaces ", "x < y", "ends with <", "a <|channel|> mention"])
      expect(splitReply(text, { complete: true })).toEqual({ format: "plain", reasoning: null, thinking: false, answer: text });
  });
});

describe("splitReply: harmony", () => {
  it("shows analysis as reasoning and final as the answer, control tokens removed", () => {
    expect(splitReply(harmony)).toEqual({ format: "harmony", reasoning: "The user greets. Reply briefly.", thinking: false, answer: "Hello! How can I help?" });
    // without the end token (the runtime stopped on it) and from a `<|start|>`
    expect(parts("<|start|>assistant" + harmony.replace("<|return|>", ""), true)).toEqual({ reasoning: "The user greets. Reply briefly.", thinking: false, answer: "Hello! How can I help?" });
  });

  it("is still thinking while only the analysis has come", () => {
    expect(parts("<|channel|>analysis<|message|>Let me think")).toEqual({ reasoning: "Let me think", thinking: true, answer: "" });
    expect(parts("<|channel|>analysis<|message|>")).toEqual({ reasoning: "", thinking: true, answer: "" });
    // the analysis ended, the next header has not come yet
    expect(parts("<|channel|>analysis<|message|>Done.<|end|>")).toEqual({ reasoning: "Done.", thinking: true, answer: "" });
    expect(parts("<|channel|>analysis<|message|>Done.<|end|><|start|>assistant<|channel|>fin")).toEqual({ reasoning: "Done.", thinking: true, answer: "" });
  });

  it("never shows part of a token or a header, wherever the text is cut", () => {
    expect(parts("<|chan")).toEqual({ reasoning: null, thinking: false, answer: "" });
    expect(parts("<|channel|>analy")).toEqual({ reasoning: null, thinking: true, answer: "" });
    expect(parts("<|channel|>analysis<|mess")).toEqual({ reasoning: null, thinking: true, answer: "" });
    expect(parts("<|channel|>analysis<|message|>Hmm<|en")).toEqual({ reasoning: "Hmm", thinking: true, answer: "" });
    expect(parts("<|channel|>analysis<|message|>Hmm<|end|><|start|>assistant<|channel|>final<|message|>Hi<|ret")).toEqual({ reasoning: "Hmm", thinking: false, answer: "Hi" });
    for (let i = 0; i <= harmony.length; i++) {
      const p = parts(harmony.slice(0, i));
      expect(showsControl(p.answer), harmony.slice(0, i)).toBe(false);
      expect(showsControl(p.reasoning ?? ""), harmony.slice(0, i)).toBe(false);
      // what shows is always the start of what the whole reply shows
      expect("Hello! How can I help?".startsWith(p.answer), harmony.slice(0, i)).toBe(true);
      expect("The user greets. Reply briefly.".startsWith(p.reasoning ?? ""), harmony.slice(0, i)).toBe(true);
    }
  });

  it("keeps text that only looks like a token's start once the reply is complete, or once it grows into plain text", () => {
    expect(parts("<|channel|>final<|message|>a <|re")).toEqual({ reasoning: null, thinking: false, answer: "a" });
    expect(parts("<|channel|>final<|message|>a <|re", true)).toEqual({ reasoning: null, thinking: false, answer: "a <|re" });
    expect(parts("<|channel|>final<|message|>a <|rex c")).toEqual({ reasoning: null, thinking: false, answer: "a <|rex c" });
  });

  it("shows commentary as reasoning: a preamble as it is, a tool call with its recipient (not run)", () => {
    const preamble = "<|channel|>commentary<|message|>I will look it up.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>";
    expect(parts(preamble, true)).toEqual({ reasoning: "I will look it up.", thinking: false, answer: "Done." });
    const call = "<|channel|>analysis<|message|>Need the weather.<|end|>" +
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>";
    expect(parts(call, true)).toEqual({
      reasoning: "Need the weather.\n\nTool call to functions.get_weather (json): {\"city\":\"Paris\"}", thinking: false, answer: "",
    });
    // the recipient may come before the channel instead
    expect(parts("<|start|>assistant to=functions.f<|channel|>commentary<|message|>{}<|call|>", true).reasoning).toBe("Tool call to functions.f: {}");
  });

  it("takes a message whose header the prompt wrote (no channel) as the answer", () => {
    expect(parts("<|message|>Just this.<|return|>", true)).toEqual({ reasoning: null, thinking: false, answer: "Just this." });
  });
});

describe("withoutReasoning", () => {
  it("is a harmony reply's final answer, and any text with its <think> blocks removed", () => {
    expect(withoutReasoning(harmony)).toBe("Hello! How can I help?");
    expect(withoutReasoning("<think>x</think>\n\nHi")).toBe("Hi");
    expect(withoutReasoning("why</think>Because.")).toBe("Because.");
    expect(withoutReasoning("a <think>b</think> c <think>open")).toBe("a  c ");
    expect(withoutReasoning("plain")).toBe("plain");
  });
});
