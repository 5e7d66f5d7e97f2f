// What one chat-template render may cost, the error a render fails with, and
// the messages the main thread and the render worker exchange. A model file's
// tokenizer.chat_template is untrusted Jinja: it is rendered in a worker thread
// (chat-template-worker.ts) under these limits (docs/TOKENIZER.md).

export interface ChatTemplateLimits {
  /** Wall-clock time one render may take once the worker starts it, in milliseconds. */
  timeMs: number;
  /**
   * Interpreter steps: one per node evaluated, five per loop iteration (charged
   * when the loop starts), one per range() item, one per item of each list or
   * mapping the first time the template holds it, one per KiB of each string
   * value. A real template needs about 95 per message (Qwen3's), so the
   * default allows about 5,000 messages.
   */
  maxSteps: number;
  /** Output allowed whatever the input's size, in characters (UTF-16 code units). */
  minOutputChars: number;
  /** Output allowed per character of input (message contents, BOS and EOS text) when that is more. */
  outputCharsPerInputChar: number;
  /** The worker's JavaScript heap (V8 old generation), in MiB. */
  memoryMiB: number;
}

export const defaultChatTemplateLimits: Readonly<ChatTemplateLimits> = Object.freeze({
  timeMs: 2_000,
  maxSteps: 500_000,
  minOutputChars: 1 << 20,
  outputCharsPerInputChar: 4,
  memoryMiB: 256,
});

/** The environment variables that override the default limits (`guild run`, `guild serve`, the app). */
export const chatTemplateLimitEnv = {
  timeMs: "GUILD_TEMPLATE_TIME_MS",
  maxSteps: "GUILD_TEMPLATE_MAX_STEPS",
  minOutputChars: "GUILD_TEMPLATE_MAX_OUTPUT",
  memoryMiB: "GUILD_TEMPLATE_MEMORY_MIB",
} as const satisfies Partial<Record<keyof ChatTemplateLimits, string>>;

/** The default limits with the environment's overrides; a malformed value is a one-line error. */
export function chatTemplateLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): ChatTemplateLimits {
  const limits: ChatTemplateLimits = { ...defaultChatTemplateLimits };
  for (const [key, name] of Object.entries(chatTemplateLimitEnv) as [keyof typeof chatTemplateLimitEnv, string][]) {
    const raw = env[name];
    if (raw === undefined || raw === "") continue;
    const value = Number(raw);
    if (!Number.isSafeInteger(value) || value <= 0)
      throw new ChatTemplateError(`${name} must be a positive integer (got ${JSON.stringify(raw.slice(0, 40))})`, "renderer");
    limits[key] = value;
  }
  return limits;
}

/** The output size limit for an input of this many characters. */
export function outputLimitChars(limits: ChatTemplateLimits, inputChars: number): number {
  return Math.max(limits.minOutputChars, Math.ceil(inputChars * limits.outputCharsPerInputChar));
}

export type ChatTemplateLimitKind = "time" | "steps" | "output" | "memory";

/**
 * A render that failed: the template raised or was malformed ("template"), a
 * limit tripped, or the renderer itself could not run ("renderer").
 * Messages are one line and quote at most a short prefix of the template's own error.
 */
export class ChatTemplateError extends Error {
  override name = "ChatTemplateError";
  constructor(
    message: string,
    readonly kind: ChatTemplateLimitKind | "template" | "renderer",
  ) {
    super(message);
  }
}

/** Longest part of a template's own error message that an error quotes. */
export const quotedErrorChars = 120;

/** A short, one-line prefix of untrusted text, for quoting in an error. */
export function quoteUntrusted(text: string, max = quotedErrorChars): string {
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ").trim();
  if (flat.length <= max) return flat;
  // never cut a surrogate pair in half
  const end = /[\ud800-\udbff]/.test(flat.charAt(max - 1)) ? max - 1 : max;
  return `${flat.slice(0, end)}…`;
}

function describeLimit(kind: ChatTemplateLimitKind, limits: ChatTemplateLimits, maxOutputChars: number): string {
  switch (kind) {
    case "time": return `the render time limit (${limits.timeMs / 1000} s)`;
    case "steps": return `the render step limit (${limits.maxSteps.toLocaleString("en-US")} steps)`;
    case "output": return `the output size limit (${maxOutputChars.toLocaleString("en-US")} characters)`;
    case "memory": return `the render memory limit (${limits.memoryMiB} MiB)`;
  }
}

export function limitError(templateName: string, kind: ChatTemplateLimitKind, limits: ChatTemplateLimits, maxOutputChars: number): ChatTemplateError {
  return new ChatTemplateError(`${templateName} exceeded ${describeLimit(kind, limits, maxOutputChars)}`, kind);
}

// ---------------------------------------------------------------------------
// The worker's protocol (structured-cloned over postMessage)

export interface RenderJob {
  id: number;
  source: string;
  messages: { role: string; content: string }[];
  bosToken: string;
  eosToken: string;
  addGenerationPrompt: boolean;
  /** The template's `reasoning_effort`; absent = left undefined, so that the template's default applies. */
  reasoningEffort?: string;
  maxSteps: number;
  maxOutputChars: number;
}

/** What the worker posts: once `ready` when it can take jobs, then one reply per job, in order. */
export type WorkerMessage =
  | { ready: true }
  | RenderReply;

export type RenderReply =
  | { id: number; ok: true; text: string }
  | { id: number; ok: false; limit: "steps" | "output" }
  | { id: number; ok: false; error: string };
