// A chat's generation settings: their defaults, the built-in presets and the
// one set of rules for their values, shared by ChatService (which refuses a bad
// value), the chat import (an exported file carries its settings) and the
// renderer's settings form (which says why a value cannot be saved). Pure
// TypeScript: no Node, no DOM.

/** What a chat does when its history no longer fits in the model's context (docs/DESKTOP_APP.md, "Long chats"). */
export type OverflowPolicy = "shift" | "stop";

export interface GenerationSettings {
  systemPrompt: string;
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus sampling mass; 1 = off. */
  topP: number;
  /** Keep the k most likely tokens; 0 = off. */
  topK: number;
  /** Drop tokens below minP × the top probability; 0 = off. */
  minP: number;
  /** Penalty for repeating recent tokens; 1 = off. */
  repeatPenalty: number;
  /** null = a new random seed for every reply. */
  seed: number | null;
  /** Most tokens of one reply; null = up to the context (no cap of the app's own). */
  maxTokens: number | null;
  /** "shift": drop the oldest turns from the prompt; "stop": refuse and offer a new chat with a summary. */
  overflow: OverflowPolicy;
}

export type SamplingField = "temperature" | "topP" | "topK" | "minP" | "repeatPenalty";

/** What a new chat starts with: the Balanced preset, the runtime's own sampling defaults but a cooler temperature. */
export const defaultGenerationSettings: GenerationSettings = {
  systemPrompt: "You are a helpful assistant.",
  temperature: 0.7,
  topP: 0.95,
  topK: 40,
  minP: 0.05,
  repeatPenalty: 1,
  seed: null,
  maxTokens: null,
  overflow: "shift",
};

export interface Preset {
  id: string;
  name: string;
  /** Built in (cannot be deleted) or saved by the user. */
  builtIn: boolean;
  /** The fields the preset sets; the others keep their values when it is applied. */
  settings: Partial<GenerationSettings>;
}

/** Built-in presets set the sampling values only; a user's preset also keeps the system prompt, seed and max tokens. */
export const builtInPresets: readonly Preset[] = [
  { id: "builtin:balanced", name: "Balanced", builtIn: true, settings: { temperature: 0.7, topP: 0.95, topK: 40, minP: 0.05, repeatPenalty: 1 } },
  { id: "builtin:precise", name: "Precise", builtIn: true, settings: { temperature: 0.2, topP: 0.9, topK: 20, minP: 0.1, repeatPenalty: 1 } },
  { id: "builtin:creative", name: "Creative", builtIn: true, settings: { temperature: 1.1, topP: 0.98, topK: 100, minP: 0.02, repeatPenalty: 1.05 } },
];

/** The fields a user's preset saves (everything but the overflow policy, which is about one chat's history). */
export const presetFields = ["systemPrompt", "temperature", "topP", "topK", "minP", "repeatPenalty", "seed", "maxTokens"] as const;

interface NumberRule { min: number; max: number; integer: boolean; nullable: boolean }

/**
 * The ranges of the numeric settings. The same as the OpenAI API's (docs/API.md,
 * "Parameters"): the sampler works in 32-bit floats, so top-p and the repeat
 * penalty have floors that stay meaningful there.
 */
export const settingRules: Readonly<Record<Exclude<keyof GenerationSettings, "systemPrompt" | "overflow">, NumberRule>> = {
  temperature: { min: 0, max: 2, integer: false, nullable: false },
  topP: { min: 1e-6, max: 1, integer: false, nullable: false },
  topK: { min: 0, max: 2 ** 31 - 1, integer: true, nullable: false },
  minP: { min: 0, max: 1, integer: false, nullable: false },
  repeatPenalty: { min: 0.01, max: 10, integer: false, nullable: false },
  seed: { min: 0, max: Number.MAX_SAFE_INTEGER, integer: true, nullable: true },
  maxTokens: { min: 1, max: 2 ** 31 - 1, integer: true, nullable: true },
};

/** The longest system prompt a chat keeps. */
export const maxSystemPromptChars = 100_000;

const settingNames = new Set<string>(Object.keys(defaultGenerationSettings));

/**
 * Checks `value` (untrusted: a request, an imported file) as a partial set of
 * settings: every field must be known and in range. Returns the fields, or the
 * first problem as one sentence naming the field.
 */
export function checkSettings(value: unknown): { ok: true; settings: Partial<GenerationSettings> } | { ok: false; problem: string } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { ok: false, problem: "settings must be an object" };
  const out: Partial<GenerationSettings> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (!settingNames.has(key)) return { ok: false, problem: `unknown setting ${JSON.stringify(key)}` };
    if (key === "systemPrompt") {
      if (typeof v !== "string") return { ok: false, problem: "systemPrompt must be a string" };
      if (v.length > maxSystemPromptChars) return { ok: false, problem: `systemPrompt is longer than ${maxSystemPromptChars} characters` };
      out.systemPrompt = v;
    } else if (key === "overflow") {
      if (v !== "shift" && v !== "stop") return { ok: false, problem: 'overflow must be "shift" or "stop"' };
      out.overflow = v;
    } else {
      const name = key as keyof typeof settingRules;
      const problem = checkNumber(name, v);
      if (problem) return { ok: false, problem };
      (out as Record<string, unknown>)[name] = v;
    }
  }
  return { ok: true, settings: out };
}

/** The problem with one numeric setting's value, or null. */
export function checkNumber(name: keyof typeof settingRules, v: unknown): string | null {
  const rule = settingRules[name];
  if (v === null && rule.nullable) return null;
  const what = rule.integer ? "a whole number" : "a number";
  if (typeof v !== "number" || !Number.isFinite(v) || (rule.integer && !Number.isInteger(v)) || v < rule.min || v > rule.max)
    return `${name} must be ${what} from ${rule.min} to ${rule.max}${rule.nullable ? " (or empty)" : ""}`;
  return null;
}

/** `base` with the (already checked) `change` applied. */
export function withSettings(base: GenerationSettings, change: Partial<GenerationSettings>): GenerationSettings {
  const next = { ...base };
  for (const key of Object.keys(change) as (keyof GenerationSettings)[]) {
    const v = change[key];
    if (v !== undefined) (next as Record<string, unknown>)[key] = v;
  }
  return next;
}

/** The fields of `settings` a user's preset keeps. */
export function presetPart(settings: GenerationSettings): Partial<GenerationSettings> {
  const out: Partial<GenerationSettings> = {};
  for (const key of presetFields) (out as Record<string, unknown>)[key] = settings[key];
  return out;
}
