// Getting models: a search of the Hugging Face Hub, one repository's GGUF
// models, and the downloads the main process runs (their progress arrives as
// `downloads.changed`).
import type { StateCreator } from "zustand";

import type { DownloadInfo, HubModel, HubRepoFiles } from "../../shared/app-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface HubSlice {
  hubResults: HubModel[] | null;
  hubSearching: boolean;
  hubError: string | null;
  repoFiles: HubRepoFiles | null;
  repoLoading: string | null;
  downloads: DownloadInfo[];
  searchHub(query: string): Promise<void>;
  openRepo(repo: string): Promise<void>;
  closeRepo(): void;
  startDownload(repo: string, name: string): Promise<void>;
  cancelDownload(id: string): Promise<void>;
  resumeDownload(id: string): Promise<void>;
  clearDownload(id: string): Promise<void>;
  refreshDownloads(): Promise<void>;
  onDownloads(list: DownloadInfo[]): void;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createHubSlice: StateCreator<AppState, [], [], HubSlice> = (set, get) => ({
  hubResults: null,
  hubSearching: false,
  hubError: null,
  repoFiles: null,
  repoLoading: null,
  downloads: [],
  searchHub: async (query) => {
    set({ hubSearching: true, hubError: null, repoFiles: null });
    try {
      set({ hubResults: await client.hub.search({ query }), hubSearching: false });
    } catch (err) {
      set({ hubError: message(err), hubSearching: false, hubResults: null });
    }
  },
  openRepo: async (repo) => {
    set({ repoLoading: repo, hubError: null });
    try {
      const files = await client.hub.files({ repo });
      if (get().repoLoading === repo) set({ repoFiles: files, repoLoading: null });
    } catch (err) {
      set({ hubError: message(err), repoLoading: null });
    }
  },
  closeRepo: () => set({ repoFiles: null }),
  startDownload: async (repo, name) => {
    set({ hubError: null });
    try {
      const d = await client.hub.download({ repo, name });
      get().onDownloads([...get().downloads.filter((x) => x.id !== d.id), d]);
    } catch (err) {
      set({ hubError: message(err) });
    }
  },
  cancelDownload: async (id) => {
    try {
      await client.hub.cancel({ id });
    } catch (err) {
      set({ hubError: message(err) });
    }
  },
  resumeDownload: async (id) => {
    try {
      await client.hub.resume({ id });
    } catch (err) {
      set({ hubError: message(err) });
    }
  },
  clearDownload: async (id) => {
    try {
      await client.hub.clear({ id });
      set({ downloads: get().downloads.filter((d) => d.id !== id) });
    } catch (err) {
      set({ hubError: message(err) });
    }
  },
  refreshDownloads: async () => {
    try {
      set({ downloads: await client.hub.downloads() });
    } catch {
      // shown with the next event
    }
  },
  onDownloads: (list) => {
    const before = new Map(get().downloads.map((d) => [d.id, d.state]));
    set({ downloads: list });
    // A model that just arrived: the open repository's "in the library" marks change.
    const finished = list.some((d) => d.state === "done" && before.get(d.id) !== "done");
    const repo = get().repoFiles?.repo;
    if (finished && repo) void get().openRepo(repo);
  },
});
