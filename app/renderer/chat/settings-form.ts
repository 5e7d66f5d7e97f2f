// The chat settings form as typed, and the GenerationSettings it saves. The
// rules are the service's own (app/shared/chat-settings.ts): the form says
// which field is wrong before anything is sent.
import {
  checkNumber, type GenerationSettings, type OverflowPolicy, type settingRules,
} from "../../shared/chat-settings.js";

type NumberField = keyof typeof settingRules;

export type SettingsForm = { systemPrompt: string; overflow: OverflowPolicy } & { [K in NumberField]: string };

export const numberFields: readonly NumberField[] = ["temperature", "topP", "topK", "minP", "repeatPenalty", "seed", "maxTokens"];

/** What each field is called on the page. */
export const fieldLabels: Record<NumberField, string> = {
  temperature: "Temperature", topP: "Top-p", topK: "Top-k", minP: "Min-p", repeatPenalty: "Repeat penalty", seed: "Seed",
  maxTokens: "Max tokens",
};

export function formOf(s: GenerationSettings): SettingsForm {
  const text = (v: number | null) => (v === null ? "" : String(v));
  return {
    systemPrompt: s.systemPrompt, overflow: s.overflow,
    temperature: text(s.temperature), topP: text(s.topP), topK: text(s.topK), minP: text(s.minP),
    repeatPenalty: text(s.repeatPenalty), seed: text(s.seed), maxTokens: text(s.maxTokens),
  };
}

/** The settings the form holds, or one sentence per field that cannot be saved. */
export function parseForm(form: SettingsForm): { settings: GenerationSettings; errors: [] } | { settings: null; errors: string[] } {
  const errors: string[] = [];
  const out: Record<string, unknown> = { systemPrompt: form.systemPrompt, overflow: form.overflow };
  for (const name of numberFields) {
    const text = form[name].trim();
    const value = text === "" ? null : /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(text) ? Number(text) : Number.NaN;
    const problem = checkNumber(name, value);
    if (problem) errors.push(`${fieldLabels[name]}: ${problem.replace(/^\w+ /, "")}.`);
    else out[name] = value;
  }
  return errors.length > 0 ? { settings: null, errors } : { settings: out as unknown as GenerationSettings, errors: [] };
}

/** True when the form would save something other than `saved`. */
export function formDiffers(form: SettingsForm, saved: GenerationSettings): boolean {
  const a = formOf(saved);
  return (Object.keys(a) as (keyof SettingsForm)[]).some((k) => a[k].trim() !== form[k].trim());
}
