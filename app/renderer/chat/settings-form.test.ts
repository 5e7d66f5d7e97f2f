// The chat settings form (as typed → GenerationSettings, with one sentence per
// bad field) and the context meter's arithmetic from stored replies.
import { describe, expect, it } from "vitest";

import type { Message } from "../../shared/app-contract.js";
import { defaultGenerationSettings } from "../../shared/chat-settings.js";
import { contextView } from "./context-view.js";
import { formDiffers, formOf, parseForm } from "./settings-form.js";

describe("the settings form", () => {
  it("round-trips the saved settings, empty seed and max tokens meaning random and up to the context", () => {
    const form = formOf(defaultGenerationSettings);
    expect(form).toMatchObject({ temperature: "0.7", seed: "", maxTokens: "", overflow: "shift" });
    expect(parseForm(form)).toEqual({ settings: defaultGenerationSettings, errors: [] });
    expect(formDiffers(form, defaultGenerationSettings)).toBe(false);
    expect(formDiffers({ ...form, maxTokens: "64" }, defaultGenerationSettings)).toBe(true);
    expect(parseForm({ ...form, maxTokens: " 64 ", seed: "7" }).settings).toMatchObject({ maxTokens: 64, seed: 7 });
  });

  it("names every field it cannot save", () => {
    const r = parseForm({ ...formOf(defaultGenerationSettings), temperature: "hot", topK: "1.5", maxTokens: "0", topP: "" });
    expect(r.settings).toBeNull();
    expect(r.errors).toEqual([
      "Temperature: must be a number from 0 to 2.",
      "Top-p: must be a number from 0.000001 to 1.",
      "Top-k: must be a whole number from 0 to 2147483647.",
      "Max tokens: must be a whole number from 1 to 2147483647 (or empty).",
    ]);
  });
});

describe("contextView", () => {
  const msg = (id: string, role: Message["role"], extra: Partial<Message> = {}): Message => ({
    id, conversationId: "c", role, content: id, status: "complete", createdAt: "", stats: null, error: null, parentId: null,
    siblingIds: [id], model: null, edited: false, contextFrom: null, ...extra,
  });
  const stats = (promptTokens: number, generatedTokens: number, stopReason: "eos" | "context" = "eos") =>
    ({ promptTokens, generatedTokens, tokensPerSecond: 1, ttftMs: 1, queueMs: 0, stopReason, contextSize: 512 });

  it("uses the latest reply's tokens against the loaded model's context and marks what its prompt no longer held", () => {
    const path = [msg("q1", "user"), msg("a1", "assistant", { stats: stats(100, 20) }), msg("q2", "user"),
      msg("a2", "assistant", { stats: stats(300, 40), contextFrom: "q2" }), msg("q3", "user")];
    expect(contextView(path, 512)).toEqual({ used: 340, limit: 512, firstInContext: 2 });
    expect(contextView(path, null).limit).toBe(512);
    expect(contextView([], null)).toEqual({ used: 0, limit: 0, firstInContext: 0 });
    // A refused prompt shows how far over it is; a reply that filled the context counts at most the context.
    expect(contextView([msg("q", "user"), msg("a", "assistant", { status: "error", stats: stats(600, 0, "context") })], 512).used).toBe(600);
    expect(contextView([msg("q", "user"), msg("a", "assistant", { stats: stats(20, 493, "context") })], 512).used).toBe(512);
  });
});
