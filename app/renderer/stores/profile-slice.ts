// Startup profile: the profile on screen and the recent ones.
import type { StateCreator } from "zustand";

import type { ProfileRecord } from "../../shared/app-contract.js";
import type { StartupProfileJson } from "../../shared/runtime-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface ProfileSlice {
  recentProfiles: ProfileRecord[];
  profile: StartupProfileJson | null;
  profileSource: string | null;
  profileError: string | null;
  refreshProfiles(): Promise<void>;
  showCurrentProfile(): Promise<void>;
  showProfile(id: string): Promise<void>;
  openProfileText(name: string, json: string): Promise<void>;
  onProfilesChanged(recent: ProfileRecord[]): void;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createProfileSlice: StateCreator<AppState, [], [], ProfileSlice> = (set) => ({
  recentProfiles: [],
  profile: null,
  profileSource: null,
  profileError: null,
  refreshProfiles: async () => {
    try {
      set({ recentProfiles: await client.profiles.recent() });
    } catch (err) {
      set({ profileError: message(err) });
    }
  },
  showCurrentProfile: async () => {
    try {
      const profile = await client.models.profile();
      set({ profile, profileSource: profile ? "current model" : null, profileError: null });
    } catch (err) {
      set({ profileError: message(err) });
    }
  },
  showProfile: async (id) => {
    try {
      set({ profile: await client.profiles.get({ id }), profileSource: `recent load ${id}`, profileError: null });
    } catch (err) {
      set({ profileError: message(err) });
    }
  },
  openProfileText: async (name, json) => {
    try {
      set({ profile: await client.profiles.open({ json }), profileSource: name, profileError: null });
    } catch (err) {
      set({ profileError: `${name}: ${message(err)}` });
    }
  },
  onProfilesChanged: (recentProfiles) => set({ recentProfiles }),
});
