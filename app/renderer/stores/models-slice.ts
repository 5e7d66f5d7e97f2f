// Models: the files the app knows, the current model, a load's stage progress,
// the inspected file (with what this runtime can load and the memory plan's
// facts), and the folder browser web mode uses instead of a file dialog.
import type { StateCreator } from "zustand";

import {
  loadCancelledMessage, type FolderListing, type ModelFile, type ModelProgressEvent, type ModelStateEvent, type ModelSummary,
} from "../../shared/app-contract.js";
import type { LoadedModel, ModelLoadSettings } from "../../shared/runtime-contract.js";
import { deviceHint } from "../profile/placement.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface ModelsSlice {
  files: ModelFile[];
  current: LoadedModel | null;
  loadingPath: string | null;
  progress: ModelProgressEvent | null;
  summary: ModelSummary | null;
  modelsError: string | null;
  /** A plain note about the last load (e.g. that it was cancelled); not an error. */
  modelsNotice: string | null;
  /** A cancel was asked for and the load has not ended yet. */
  cancellingLoad: boolean;
  /** Where the current model runs, from its startup profile ("runs on the CPU: …"), for the GPU settings. */
  currentDevice: string | null;
  /** The folder browser (web mode's way to pick a file or folder), when open. */
  browser: FolderListing | null;
  browserError: string | null;
  refreshModels(): Promise<void>;
  /** `ignoreMemory`: load although the memory plan says it does not fit ("Load anyway"). */
  loadModel(path: string, settings?: ModelLoadSettings, ignoreMemory?: boolean): Promise<void>;
  unloadModel(): Promise<void>;
  cancelLoad(): Promise<void>;
  inspectModel(path: string, settings?: ModelLoadSettings): Promise<void>;
  browse(dir?: string): Promise<void>;
  closeBrowser(): void;
  /** Electron's open-file dialog; resolves to the path picked, or null. */
  pickModelFile(): Promise<string | null>;
  removeModel(path: string): Promise<void>;
  onModelsChanged(files: ModelFile[]): void;
  onModelProgress(e: ModelProgressEvent): void;
  onModelState(e: ModelStateEvent): void;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createModelsSlice: StateCreator<AppState, [], [], ModelsSlice> = (set, get) => ({
  files: [],
  current: null,
  loadingPath: null,
  progress: null,
  summary: null,
  modelsError: null,
  modelsNotice: null,
  cancellingLoad: false,
  currentDevice: null,
  browser: null,
  browserError: null,
  refreshModels: async () => {
    try {
      const [files, current] = await Promise.all([client.models.list(), client.models.current()]);
      const profile = current ? await client.models.profile().catch(() => null) : null;
      set({ files, current, currentDevice: profile ? deviceHint(profile) : null });
    } catch (err) {
      set({ modelsError: message(err) });
    }
  },
  loadModel: async (path, settings, ignoreMemory) => {
    set({ modelsError: null, modelsNotice: null, loadingPath: path, progress: null });
    try {
      const current = await client.models.load({ path, ...(settings ? { settings } : {}), ...(ignoreMemory ? { ignoreMemory } : {}) });
      set({ current, loadingPath: null });
      await get().refreshModels();
    } catch (err) {
      // A cancelled load is reported by its model.state event, as a note.
      const why = message(err);
      set(why === loadCancelledMessage ? { loadingPath: null } : { modelsError: why, loadingPath: null });
      // Refused for memory: show the file's plan, where "Load anyway" is, and keep saying why
      // (the inspect clears the page's error; only its own failure may replace the refusal).
      if (/needs about .* of RAM/.test(why) && !ignoreMemory) {
        await get().inspectModel(path, settings);
        if (get().modelsError === null) set({ modelsError: why });
      }
    }
  },
  cancelLoad: async () => {
    set({ cancellingLoad: true });
    try {
      const { cancelled } = await client.models.cancelLoad();
      if (!cancelled) set({ cancellingLoad: false });
    } catch (err) {
      set({ modelsError: message(err), cancellingLoad: false });
    }
  },
  unloadModel: async () => {
    try {
      await client.models.unload();
      set({ current: null, progress: null });
    } catch (err) {
      set({ modelsError: message(err) });
    }
  },
  inspectModel: async (path, settings) => {
    set({ modelsError: null });
    try {
      set({ summary: await client.models.inspect(settings ? { path, settings } : { path }) });
    } catch (err) {
      set({ modelsError: message(err), summary: null });
    }
  },
  browse: async (dir) => {
    try {
      set({ browser: await client.models.browse(dir ? { dir } : {}), browserError: null });
    } catch (err) {
      set({ browserError: message(err) });
    }
  },
  closeBrowser: () => set({ browser: null, browserError: null }),
  pickModelFile: async () => {
    try {
      return (await client.models.pickFile()).path;
    } catch (err) {
      set({ modelsError: message(err) });
      return null;
    }
  },
  removeModel: async (path) => {
    set({ modelsError: null, modelsNotice: null });
    try {
      const { removed } = await client.models.remove({ path });
      const name = path.split(/[\\/]/).pop();
      set({ modelsNotice: removed.length > 1 ? `Deleted ${name} (${removed.length} shards).` : `Deleted ${name}.` });
      if (get().summary?.path === path) set({ summary: null });
      await get().refreshModels();
    } catch (err) {
      set({ modelsError: message(err) });
    }
  },
  onModelsChanged: (files) => set({ files }),
  onModelProgress: (e) => set({ progress: e, loadingPath: e.stage === "ready" ? get().loadingPath : e.path }),
  onModelState: (e) => {
    // The current model stays while another loads (ModelManager unloads it only when memory requires, with an "unloaded" event).
    if (e.kind === "loading") set({ loadingPath: e.path, progress: null, modelsNotice: null, cancellingLoad: false });
    else if (e.kind === "loaded") {
      set({ current: e.model, loadingPath: null, cancellingLoad: false });
      void get().refreshModels();
    } else if (e.kind === "unloaded") set({ current: null });
    else if (e.kind === "cancelled") {
      const back = e.restored ? ` ${e.restored.name}, unloaded to make room, was loaded again.` : "";
      set({
        loadingPath: null, progress: null, cancellingLoad: false, modelsNotice: `Loading ${e.path} was cancelled.${back}`,
        ...(e.restored ? { current: e.restored } : {}),
      });
      void get().refreshModels();
    } else {
      set({ loadingPath: null, cancellingLoad: false, modelsError: `loading ${e.path} failed: ${e.message}`, ...(e.restored ? { current: e.restored } : {}) });
      void get().refreshModels();  // the previous model may still be loaded
    }
  },
});
