// The chat's generation settings: a preset, the system prompt, sampling, seed,
// max tokens and what happens when the context is full. Saved with the chat
// when a field is left, on Save, when the panel closes and before the chat
// changes; "Unsaved changes" shows until then, and a value that cannot be
// saved says why.
import { useState, type FocusEvent } from "react";
import { useShallow } from "zustand/react/shallow";

import type { Conversation } from "../../shared/app-contract.js";
import { settingRules } from "../../shared/chat-settings.js";
import { useApp } from "../stores/store.js";
import { fieldLabels, formDiffers, formOf, type SettingsForm } from "./settings-form.js";

const hints: Record<string, string> = {
  topP: "1 = off", topK: "0 = off", minP: "0 = off", repeatPenalty: "1 = off", seed: "random", maxTokens: "up to the context",
};

export function SettingsPanel({ c }: { c: Conversation }) {
  const { form, problems, presets } = useApp(useShallow((s) => ({ form: s.settingsForm, problems: s.settingsProblems, presets: s.presets })));
  const edit = useApp((s) => s.editSettings);
  const save = useApp((s) => s.saveSettings);
  const applyPreset = useApp((s) => s.applyPreset);
  const savePreset = useApp((s) => s.savePreset);
  const deletePreset = useApp((s) => s.deletePreset);
  const [presetId, setPresetId] = useState("");
  const [naming, setNaming] = useState<string | null>(null);
  const shown = form ?? formOf(c.settings);
  const dirty = form !== null && formDiffers(form, c.settings);
  const userPreset = presets.find((p) => p.id === presetId && !p.builtIn);
  // Leaving a field (for another one, or another part of the page) saves.
  const onBlur = (e: FocusEvent<HTMLFormElement>) => {
    if (!e.currentTarget.contains(e.relatedTarget as Node | null)) void save();
  };
  const numberInput = (name: keyof typeof settingRules) => (
    <label key={name}>{fieldLabels[name]}
      <input type="text" inputMode="decimal" value={shown[name]} placeholder={hints[name] ?? ""} aria-label={fieldLabels[name]}
        onChange={(e) => edit({ [name]: e.target.value } as Partial<SettingsForm>)} />
    </label>
  );
  const temperature = Number(shown.temperature);
  return (
    <form className="settings chat-settings" data-testid="chat-settings" onBlur={onBlur} onSubmit={(e) => { e.preventDefault(); void save(); }}>
      <div className="settings-row">
        <label>Preset
          <select value={presetId} aria-label="Preset" onChange={(e) => { setPresetId(e.target.value); if (e.target.value) applyPreset(e.target.value); }}>
            <option value="">Choose…</option>
            {presets.map((p) => <option key={p.id} value={p.id}>{p.name}{p.builtIn ? "" : " (yours)"}</option>)}
          </select>
        </label>
        {naming === null
          ? <button type="button" onClick={() => setNaming("")}>Add preset…</button>
          : (
            <span className="preset-name">
              <input autoFocus value={naming} placeholder="Preset name" aria-label="Preset name" maxLength={60}
                onChange={(e) => setNaming(e.target.value)}
                onKeyDown={(e) => {
                  if (e.key === "Enter") { e.preventDefault(); if (naming.trim()) void savePreset(naming).then(() => setNaming(null)); }
                  if (e.key === "Escape") { e.stopPropagation(); setNaming(null); }
                }} />
              <button type="button" disabled={!naming.trim()} onClick={() => void savePreset(naming).then(() => setNaming(null))}>Keep</button>
            </span>
          )}
        {userPreset && <button type="button" onClick={() => { void deletePreset(userPreset.id); setPresetId(""); }}>Delete preset</button>}
        <span className={`settings-state${dirty ? " dirty" : ""}`} data-testid="settings-state" aria-live="polite">
          {problems.length > 0 ? "Not saved" : dirty ? "● Unsaved changes" : "Saved with this chat"}
        </span>
        <button type="submit" className="primary" disabled={!dirty}>Save</button>
      </div>
      <label className="wide">System prompt
        <textarea rows={2} value={shown.systemPrompt} onChange={(e) => edit({ systemPrompt: e.target.value })} aria-label="System prompt" />
      </label>
      <div className="settings-grid">
        <label>Temperature {Number.isFinite(temperature) ? temperature.toFixed(2) : shown.temperature}
          <input type="range" min={0} max={2} step={0.05} value={Number.isFinite(temperature) ? temperature : 0}
            onChange={(e) => edit({ temperature: e.target.value })} aria-label="Temperature" />
        </label>
        {(["topP", "topK", "minP", "repeatPenalty", "seed", "maxTokens"] as const).map(numberInput)}
        <label>When the context is full
          <select value={shown.overflow} aria-label="When the context is full" onChange={(e) => edit({ overflow: e.target.value as SettingsForm["overflow"] })}>
            <option value="shift">Drop the oldest turns (context shift)</option>
            <option value="stop">Stop, and offer a new chat with a summary</option>
          </select>
        </label>
      </div>
      {problems.length > 0 && <ul className="settings-problems" role="alert" data-testid="settings-problems">{problems.map((p) => <li key={p}>{p}</li>)}</ul>}
    </form>
  );
}
