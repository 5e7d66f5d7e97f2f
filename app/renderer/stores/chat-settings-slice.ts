// The selected chat's generation settings as the form holds them, and the
// presets. Changes are never lost silently: the form is saved when a field is
// left, when the panel closes, before a send and when another chat is chosen;
// a value that cannot be saved is named, and leaving it asks first.
import type { StateCreator } from "zustand";

import { presetPart, withSettings, type Preset } from "../../shared/chat-settings.js";
import { formDiffers, formOf, parseForm, type SettingsForm } from "../chat/settings-form.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface ChatSettingsSlice {
  presets: Preset[];
  /** The form when it differs from the saved settings (or has not been saved yet); null = showing the saved ones. */
  settingsForm: SettingsForm | null;
  /** Why the form could not be saved. */
  settingsProblems: string[];
  loadPresets(): Promise<void>;
  editSettings(change: Partial<SettingsForm>): void;
  /** Saves the form if it changed; false when a value is bad (settingsProblems says which). */
  saveSettings(): Promise<boolean>;
  /** Before the chat changes: saves, or asks whether to drop values that cannot be saved. */
  leaveSettings(): Promise<boolean>;
  resetSettingsDraft(): void;
  /** Changes some fields and saves at once (e.g. the context-full banner's "drop oldest turns"). */
  changeSettings(change: Partial<SettingsForm>): Promise<boolean>;
  applyPreset(id: string): void;
  /** Saves the form's values (all but the overflow policy) as a preset of the user's. */
  savePreset(name: string): Promise<void>;
  deletePreset(id: string): Promise<void>;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createChatSettingsSlice: StateCreator<AppState, [], [], ChatSettingsSlice> = (set, get) => {
  const selected = () => get().conversations.find((c) => c.id === get().selectedId) ?? null;
  const currentForm = (): SettingsForm | null => {
    const c = selected();
    return get().settingsForm ?? (c ? formOf(c.settings) : null);
  };
  return {
    presets: [],
    settingsForm: null,
    settingsProblems: [],
    loadPresets: async () => {
      try {
        set({ presets: await client.chat.listPresets() });
      } catch (err) {
        set({ chatError: message(err) });
      }
    },
    editSettings: (change) => {
      const form = currentForm();
      if (form) set({ settingsForm: { ...form, ...change }, settingsProblems: [] });
    },
    saveSettings: async () => {
      const c = selected();
      const form = get().settingsForm;
      if (!c || !form) return true;
      if (!formDiffers(form, c.settings)) {
        set({ settingsForm: null, settingsProblems: [] });
        return true;
      }
      const parsed = parseForm(form);
      if (parsed.settings === null) {
        set({ settingsProblems: parsed.errors });
        return false;
      }
      try {
        const saved = await client.chat.updateSettings({ id: c.id, settings: parsed.settings });
        set({ conversations: get().conversations.map((x) => (x.id === c.id ? saved : x)), settingsProblems: [] });
        // Typed on meanwhile: keep the newer text as the form.
        if (get().settingsForm === form) set({ settingsForm: null });
        return true;
      } catch (err) {
        set({ settingsProblems: [message(err)] });
        return false;
      }
    },
    leaveSettings: async () => {
      if (await get().saveSettings()) return true;
      const why = get().settingsProblems.join(" ");
      if (!window.confirm(`This chat's settings were changed but cannot be saved: ${why}\n\nDiscard these changes?`)) return false;
      get().resetSettingsDraft();
      return true;
    },
    resetSettingsDraft: () => set({ settingsForm: null, settingsProblems: [] }),
    changeSettings: async (change) => {
      get().editSettings(change);
      return get().saveSettings();
    },
    applyPreset: (id) => {
      const preset = get().presets.find((p) => p.id === id);
      const form = currentForm();
      if (!preset || !form) return;
      const values = formOf(withSettings(selected()!.settings, preset.settings));
      const change: Partial<SettingsForm> = {};
      for (const key of Object.keys(preset.settings) as (keyof SettingsForm)[]) (change as Record<string, unknown>)[key] = values[key];
      set({ settingsForm: { ...form, ...change }, settingsProblems: [] });
    },
    savePreset: async (name) => {
      const form = currentForm();
      if (!form) return;
      const parsed = parseForm(form);
      if (parsed.settings === null) {
        set({ settingsProblems: parsed.errors });
        return;
      }
      try {
        await client.chat.savePreset({ name, settings: presetPart(parsed.settings) });
        await get().loadPresets();
      } catch (err) {
        set({ settingsProblems: [message(err)] });
      }
    },
    deletePreset: async (id) => {
      try {
        await client.chat.deletePreset({ id });
        await get().loadPresets();
      } catch (err) {
        set({ settingsProblems: [message(err)] });
      }
    },
  };
};
