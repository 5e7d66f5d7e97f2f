// One bound store from the feature slices (zustand slices pattern). Components
// read it through selectors; slices call each other only through get().action().
import { create } from "zustand";

import { client } from "../transport/index.js";
import { createChatSlice, type ChatSlice } from "./chat-slice.js";
import { createHubSlice, type HubSlice } from "./hub-slice.js";
import { createModelsSlice, type ModelsSlice } from "./models-slice.js";
import { createNoticesSlice, type NoticesSlice } from "./notices-slice.js";
import { createPackagesSlice, type PackagesSlice } from "./packages-slice.js";
import { createProfileSlice, type ProfileSlice } from "./profile-slice.js";
import { createServerSlice, type ServerSlice } from "./server-slice.js";
import { createSettingsSlice, type SettingsSlice } from "./settings-slice.js";
import { createUiSlice, type UiSlice } from "./ui-slice.js";

export type { View } from "./route.js";

export type AppState = ChatSlice & ModelsSlice & PackagesSlice & ProfileSlice & NoticesSlice & UiSlice & SettingsSlice & HubSlice & ServerSlice;

export const useApp = create<AppState>()((...a) => ({
  ...createChatSlice(...a),
  ...createModelsSlice(...a),
  ...createPackagesSlice(...a),
  ...createProfileSlice(...a),
  ...createNoticesSlice(...a),
  ...createUiSlice(...a),
  ...createSettingsSlice(...a),
  ...createHubSlice(...a),
  ...createServerSlice(...a),
}));

/** Wires the event streams into the store once; returns the unsubscribe function. */
export function connectEvents(): () => void {
  const s = useApp.getState;
  // Loaded models and running replies pin packages: keep the packages page's "pinned by" current.
  const refreshPins = () => { if (s().view === "packages") void s().refreshPackages(); };
  const offs = [
    client.on("chat.reply", (e) => {
      s().onReply(e);
      if (e.kind === "started" || e.kind === "done") refreshPins();
    }),
    client.on("model.progress", (e) => s().onModelProgress(e)),
    client.on("model.state", (e) => {
      s().onModelState(e);
      refreshPins();
    }),
    client.on("packages.changed", (e) => s().onPackagesChanged(e.packages)),
    client.on("profiles.changed", (e) => s().onProfilesChanged(e.recent)),
    client.on("notices.changed", (e) => s().onNoticesChanged(e.notices)),
    client.on("models.changed", (e) => s().onModelsChanged(e.files)),
    client.on("downloads.changed", (e) => s().onDownloads(e.downloads)),
    client.on("settings.changed", (e) => s().onSettingsChanged(e)),
    client.on("server.changed", (e) => s().onServerChanged(e)),
    client.on("server.request", (e) => s().onServerRequest(e)),
  ];
  return () => offs.forEach((off) => off());
}
