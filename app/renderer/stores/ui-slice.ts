// The shell of the window: which view is shown (mirrored in the URL, route.ts),
// whether the navigation rail is narrowed to its icons, and whether the chat's
// conversation list is hidden (both for small windows, down to 800×600).
import type { StateCreator } from "zustand";

import type { View } from "./route.js";
import type { AppState } from "./store.js";

export interface UiSlice {
  view: View;
  setView(view: View): void;
  railCollapsed: boolean;
  toggleRail(): void;
  conversationsHidden: boolean;
  setConversationsHidden(hidden: boolean): void;
}

const railKey = "guild.railCollapsed";
const conversationsKey = "guild.conversationsHidden";

function stored(key: string, fallback: boolean): boolean {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : v === "1";
  } catch {
    return fallback;
  }
}

function keep(key: string, value: boolean): void {
  try {
    localStorage.setItem(key, value ? "1" : "0");
  } catch {
    // private mode: not kept
  }
}

export const createUiSlice: StateCreator<AppState, [], [], UiSlice> = (set, get) => ({
  view: "chat",
  setView: (view) => set({ view }),
  // A narrow window starts with the rail narrowed (the user's choice is kept once made).
  railCollapsed: stored(railKey, typeof window !== "undefined" && window.innerWidth < 1000),
  toggleRail: () => {
    const railCollapsed = !get().railCollapsed;
    keep(railKey, railCollapsed);
    set({ railCollapsed });
  },
  conversationsHidden: stored(conversationsKey, false),
  setConversationsHidden: (conversationsHidden) => {
    keep(conversationsKey, conversationsHidden);
    set({ conversationsHidden });
  },
});
