// Chat prompts: the model's Jinja template rendered like llama.cpp renders it.
import { Template } from "@huggingface/jinja";

import type { GuildModel } from "./model.js";

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** Used when a model has no tokenizer.chat_template (llama.cpp falls back to ChatML too). */
export const fallbackChatTemplate =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface RenderChatOptions {
  bosToken: string;
  eosToken: string;
  addGenerationPrompt: boolean;
}

export function renderChatTemplate(source: string, messages: readonly ChatMessage[], options: RenderChatOptions): string {
  const template = new Template(source);
  return template.render({
    messages: messages.map((m) => ({ role: m.role, content: m.content })),
    add_generation_prompt: options.addGenerationPrompt,
    bos_token: options.bosToken,
    eos_token: options.eosToken,
  });
}

function tokenText(model: GuildModel, token: number | null): string {
  return token === null ? "" : new TextDecoder().decode(model.tokenToPiece(token, { renderSpecial: true }));
}

/**
 * The prompt tokens for a conversation, as llama.cpp builds them: the template
 * is rendered with bos_token/eos_token from the vocabulary; when the vocabulary
 * adds BOS itself, a BOS the template wrote is stripped, so there is exactly
 * one; the text is then tokenized with add_special and parse_special.
 */
export function chatPromptTokens(model: GuildModel, messages: readonly ChatMessage[]): number[] {
  const bosToken = tokenText(model, model.bosToken);
  const eosToken = tokenText(model, model.eosToken);
  let text = renderChatTemplate(model.chatTemplate() ?? fallbackChatTemplate, messages, {
    bosToken,
    eosToken,
    addGenerationPrompt: true,
  });
  const addsBos = model.addsBos();
  if (addsBos && bosToken !== "" && text.startsWith(bosToken)) text = text.slice(bosToken.length);
  return model.tokenize(text, { addSpecial: true, parseSpecial: true });
}
