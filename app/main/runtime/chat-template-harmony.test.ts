// A harmony-style chat template (gpt-oss's kind: a system header with the
// reasoning effort and the date, the chat's system prompt as the developer
// message, earlier replies on the final channel) rendered through the real
// path: renderChatTemplate's worker, and chatPromptTokens with a model whose
// template it is. The template is this test's own, small, with the variables
// and the checks gpt-oss's templates use: reasoning_effort (the template's
// default when undefined), strftime_now, and a refusal of channel tokens in an
// earlier reply's content.
import { afterAll, describe, expect, it } from "vitest";

import { withoutReasoning } from "../../shared/reply-channels.js";
import { ChatTemplateRenderer, chatPromptTokens, defaultChatTemplateLimits, renderChatTemplate, type ChatMessage } from "./chat-template.js";
import type { GuildModel } from "./model.js";

const harmonyTemplate = [
  "{%- if reasoning_effort is not defined %}{%- set reasoning_effort = 'medium' %}{%- endif %}",
  "{{- '<|start|>system<|message|>You are a test model.\\nCurrent date: ' + strftime_now('%Y-%m-%d') + '\\n\\nReasoning: ' + reasoning_effort + '\\n\\n# Valid channels: analysis, commentary, final.<|end|>' }}",
  "{%- for message in messages %}",
  "{%- if message.role == 'system' or message.role == 'developer' %}",
  "{{- '<|start|>developer<|message|># Instructions\\n\\n' + message.content + '<|end|>' }}",
  "{%- elif message.role == 'user' %}",
  "{{- '<|start|>user<|message|>' + message.content + '<|end|>' }}",
  "{%- elif message.role == 'assistant' %}",
  "{%- if '<|channel|>' in message.content %}{{- raise_exception('pass the analysis as thinking, not in content') }}{%- endif %}",
  "{{- '<|start|>assistant<|channel|>final<|message|>' + message.content + '<|end|>' }}",
  "{%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}",
].join("\n");

const renderer = new ChatTemplateRenderer(defaultChatTemplateLimits);
afterAll(() => renderer.close());

const reply = "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>";
const chat = (assistant: string): ChatMessage[] => [
  { role: "system", content: "Answer briefly." },
  { role: "user", content: "hi" },
  { role: "assistant", content: assistant },
  { role: "user", content: "and then?" },
];
const options = { bosToken: "<|startoftext|>", eosToken: "<|return|>", addGenerationPrompt: true, renderer };

/** What the template writes for `effort`, the date aside. */
function expected(effort: string): string {
  return `<|start|>system<|message|>You are a test model.\nCurrent date: DATE\n\nReasoning: ${effort}\n\n# Valid channels: analysis, commentary, final.<|end|>` +
    "<|start|>developer<|message|># Instructions\n\nAnswer briefly.<|end|>" +
    "<|start|>user<|message|>hi<|end|>" +
    "<|start|>assistant<|channel|>final<|message|>Hello!<|end|>" +
    "<|start|>user<|message|>and then?<|end|>" +
    "<|start|>assistant";
}
const withoutDate = (text: string) => text.replace(/Current date: \d{4}-\d{2}-\d{2}\n/, "Current date: DATE\n");

describe("a harmony chat template", () => {
  it("gets reasoning_effort when one is given, and keeps its own default when none is", async () => {
    for (const effort of ["low", "medium", "high"] as const) {
      const text = await renderChatTemplate(harmonyTemplate, chat("Hello!"), { ...options, reasoningEffort: effort });
      expect(withoutDate(text)).toBe(expected(effort));
    }
    const text = await renderChatTemplate(harmonyTemplate, chat("Hello!"), options);
    expect(text).toMatch(/Current date: \d{4}-\d{2}-\d{2}\n/);
    expect(withoutDate(text)).toBe(expected("medium"));
  });

  it("refuses an earlier reply with its channel tokens; the reply read back as its answer (as the chat history does) renders", async () => {
    await expect(renderChatTemplate(harmonyTemplate, chat(reply), options)).rejects.toThrow("pass the analysis as thinking, not in content");
    expect(withoutDate(await renderChatTemplate(harmonyTemplate, chat(withoutReasoning(reply)), { ...options, reasoningEffort: "high" }))).toBe(expected("high"));
  });

  it("chatPromptTokens hands the reasoning effort to the model's own template", async () => {
    const rendered: string[] = [];
    // Only what chatPromptTokens asks of a model: its template, its special tokens' text and the tokenizer.
    const model = {
      path: "/models/gpt-oss-test.gguf",
      bosToken: null,
      eosToken: null,
      chatTemplate: () => harmonyTemplate,
      addsBos: () => false,
      tokenToPiece: () => new Uint8Array(),
      tokenize: (text: string) => { rendered.push(text); return [text.length]; },
    } as unknown as GuildModel;
    await chatPromptTokens(model, chat("Hello!"), { reasoningEffort: "low", renderer });
    await chatPromptTokens(model, chat("Hello!"), { renderer });
    expect(rendered.map(withoutDate)).toEqual([expected("low"), expected("medium")]);
  });
});
