// Notices: what the main process must tell the user once (e.g. a damaged chat
// database was moved aside). Fetched when the app starts, kept current by
// `notices.changed`; dismissing one hides it in every window and tab.
import type { StateCreator } from "zustand";

import type { AppNotice } from "../../shared/app-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface NoticesSlice {
  notices: AppNotice[];
  refreshNotices(): Promise<void>;
  dismissNotice(id: string): Promise<void>;
  onNoticesChanged(notices: AppNotice[]): void;
}

export const createNoticesSlice: StateCreator<AppState, [], [], NoticesSlice> = (set, get) => ({
  notices: [],
  refreshNotices: async () => {
    try {
      set({ notices: await client.notices.list() });
    } catch {
      // no notices to show is not worth an error banner of its own
    }
  },
  dismissNotice: async (id) => {
    // Hidden at once; the main process's `notices.changed` confirms it.
    set({ notices: get().notices.filter((n) => n.id !== id) });
    await client.notices.dismiss({ id }).catch(() => undefined);
  },
  onNoticesChanged: (notices) => set({ notices }),
});
