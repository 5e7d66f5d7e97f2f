// The app's settings (models folder, hub endpoint, theme) as the main process
// keeps them, and the theme applied to the page: html[data-theme] ("light" or
// "dark"; none for "system", where the stylesheet follows the OS). The theme is
// also kept in localStorage so the next start paints in it at once.
import type { StateCreator } from "zustand";

import type { AppSettings, ThemeChoice } from "../../shared/app-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface SettingsSlice {
  appSettings: AppSettings | null;
  theme: ThemeChoice;
  refreshAppSettings(): Promise<void>;
  /** Saves some settings; resolves to the error's words, or null when saved. */
  saveAppSettings(req: { modelsDir?: string; hubEndpoint?: string }): Promise<string | null>;
  setTheme(theme: ThemeChoice): Promise<void>;
  onSettingsChanged(s: AppSettings): void;
}

const themeKey = "guild.theme";

export function applyTheme(theme: ThemeChoice): void {
  if (theme === "system") delete document.documentElement.dataset["theme"];
  else document.documentElement.dataset["theme"] = theme;
  try {
    localStorage.setItem(themeKey, theme);
  } catch {
    // not kept
  }
}

export function storedTheme(): ThemeChoice {
  try {
    const t = localStorage.getItem(themeKey);
    return t === "light" || t === "dark" ? t : "system";
  } catch {
    return "system";
  }
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createSettingsSlice: StateCreator<AppState, [], [], SettingsSlice> = (set, get) => ({
  appSettings: null,
  theme: storedTheme(),
  refreshAppSettings: async () => {
    try {
      get().onSettingsChanged(await client.settings.get());
    } catch {
      // shown where it matters (Preferences asks again)
    }
  },
  saveAppSettings: async (req) => {
    try {
      get().onSettingsChanged(await client.settings.update(req));
      return null;
    } catch (err) {
      return message(err);
    }
  },
  setTheme: async (theme) => {
    applyTheme(theme);
    set({ theme });
    try {
      await client.settings.update({ theme });
    } catch {
      // the page keeps the choice (localStorage) even if the main process cannot save it
    }
  },
  onSettingsChanged: (s) => {
    const before = get().appSettings?.modelsDir;
    applyTheme(s.theme);
    set({ appSettings: s, theme: s.theme });
    // The open Hub repository's "in the library" marks were taken in the folder of their
    // listing: another models folder lists them again (hub-slice.ts).
    const repo = get().repoFiles?.repo;
    if (repo && before !== undefined && before !== s.modelsDir) void get().openRepo(repo);
  },
});
