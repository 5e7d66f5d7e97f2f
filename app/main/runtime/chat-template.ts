// Chat prompts: the model's Jinja template rendered like llama.cpp renders it.
// The template comes from the model file and is untrusted: it is rendered off
// the event loop, under time, step, output and memory limits
// (chat-template-renderer.ts; docs/TOKENIZER.md "Chat templates").
import path from "node:path";

import type { ReasoningEffort } from "../../shared/runtime-contract.js";
import {
  chatTemplateLimitsFromEnv,
  outputLimitChars,
  type ChatTemplateLimits,
} from "./chat-template-limits.js";
import { ChatTemplateRenderer } from "./chat-template-renderer.js";
import type { GuildModel } from "./model.js";

export { ChatTemplateError, defaultChatTemplateLimits, type ChatTemplateLimits } from "./chat-template-limits.js";
export { ChatTemplateRenderer } from "./chat-template-renderer.js";

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
  /** The template's `reasoning_effort` (gpt-oss); absent = left undefined, so that the template's default applies. */
  reasoningEffort?: ReasoningEffort;
  /** Names the template in errors; defaults to "the chat template". */
  templateName?: string;
  /** Stops the render (a waiting one is dropped, a running one's worker terminated). */
  signal?: AbortSignal;
  /** Defaults to the process's shared renderer ({@link defaultChatTemplateRenderer}). */
  renderer?: ChatTemplateRenderer;
}

let sharedRenderer: ChatTemplateRenderer | undefined;

/**
 * The process's renderer: one worker for every model, limits from the
 * environment (GUILD_TEMPLATE_*), else {@link defaultChatTemplateLimits}.
 */
export function defaultChatTemplateRenderer(): ChatTemplateRenderer {
  sharedRenderer ??= new ChatTemplateRenderer(chatTemplateLimitsFromEnv());
  return sharedRenderer;
}

function inputChars(messages: readonly ChatMessage[], options: RenderChatOptions): number {
  return messages.reduce((n, m) => n + m.content.length, options.bosToken.length + options.eosToken.length);
}

/** Renders a template with messages, add_generation_prompt, bos_token, eos_token (and reasoning_effort if given); rejects with a ChatTemplateError. */
export function renderChatTemplate(source: string, messages: readonly ChatMessage[], options: RenderChatOptions): Promise<string> {
  const renderer = options.renderer ?? defaultChatTemplateRenderer();
  const limits: ChatTemplateLimits = renderer.limits;
  return renderer.render({
    source,
    messages,
    bosToken: options.bosToken,
    eosToken: options.eosToken,
    addGenerationPrompt: options.addGenerationPrompt,
    reasoningEffort: options.reasoningEffort,
    templateName: options.templateName ?? "the chat template",
    maxOutputChars: outputLimitChars(limits, inputChars(messages, options)),
    signal: options.signal,
  });
}

function tokenText(model: GuildModel, token: number | null): string {
  return token === null ? "" : new TextDecoder().decode(model.tokenToPiece(token, { renderSpecial: true }));
}

export interface ChatPromptOptions {
  /** How errors name the model; defaults to its file's base name (`guild run` gives the whole path). */
  modelName?: string;
  /** The template's `reasoning_effort`; absent = the template's default. */
  reasoningEffort?: ReasoningEffort;
  signal?: AbortSignal;
  renderer?: ChatTemplateRenderer;
}

/**
 * The prompt tokens for a conversation, as llama.cpp builds them: the template
 * is rendered with bos_token/eos_token from the vocabulary; when the vocabulary
 * adds BOS itself, a BOS the template wrote is stripped, so there is exactly
 * one; the text is then tokenized with add_special and parse_special.
 * Rejects with a ChatTemplateError when the template fails or exceeds a limit.
 */
export async function chatPromptTokens(model: GuildModel, messages: readonly ChatMessage[], options: ChatPromptOptions = {}): Promise<number[]> {
  const bosToken = tokenText(model, model.bosToken);
  const eosToken = tokenText(model, model.eosToken);
  const own = model.chatTemplate();
  const name = options.modelName ?? path.basename(model.path);
  let text = await renderChatTemplate(own ?? fallbackChatTemplate, messages, {
    bosToken,
    eosToken,
    addGenerationPrompt: true,
    templateName: own === null ? `the default chat template (ChatML) for ${name}` : `the chat template of ${name}`,
    ...(options.reasoningEffort !== undefined ? { reasoningEffort: options.reasoningEffort } : {}),
    ...(options.signal !== undefined ? { signal: options.signal } : {}),
    ...(options.renderer !== undefined ? { renderer: options.renderer } : {}),
  });
  const addsBos = model.addsBos();
  if (addsBos && bosToken !== "" && text.startsWith(bosToken)) text = text.slice(bosToken.length);
  return model.tokenize(text, { addSpecial: true, parseSpecial: true });
}
