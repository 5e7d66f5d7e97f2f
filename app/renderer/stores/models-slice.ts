// Models: the files the app knows, the current model, a load's stage progress.
import type { StateCreator } from "zustand";

import { loadCancelledMessage, type ModelFile, type ModelProgressEvent, type ModelStateEvent, type ModelSummary } from "../../shared/app-contract.js";
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
  refreshModels(): Promise<void>;
  loadModel(path: string, settings?: ModelLoadSettings): Promise<void>;
  unloadModel(): Promise<void>;
  cancelLoad(): Promise<void>;
  inspectModel(path: string): Promise<void>;
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
  refreshModels: async () => {
    try {
      const [files, current] = await Promise.all([client.models.list(), client.models.current()]);
      const profile = current ? await client.models.profile().catch(() => null) : null;
      set({ files, current, currentDevice: profile ? deviceHint(profile) : null });
    } catch (err) {
      set({ modelsError: message(err) });
    }
  },
  loadModel: async (path, settings) => {
    set({ modelsError: null, modelsNotice: null, loadingPath: path, progress: null });
    try {
      const current = await client.models.load(settings ? { path, settings } : { path });
      set({ current, loadingPath: null });
      await get().refreshModels();
    } catch (err) {
      // A cancelled load is reported by its model.state event, as a note.
      set(message(err) === loadCancelledMessage ? { loadingPath: null } : { modelsError: message(err), loadingPath: null });
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
  inspectModel: async (path) => {
    set({ modelsError: null });
    try {
      set({ summary: await client.models.inspect({ path }) });
    } catch (err) {
      set({ modelsError: message(err), summary: null });
    }
  },
  onModelProgress: (e) => set({ progress: e, loadingPath: e.stage === "ready" ? get().loadingPath : e.path }),
  onModelState: (e) => {
    if (e.kind === "loading") set({ loadingPath: e.path, progress: null, current: null, modelsNotice: null, cancellingLoad: false });
    else if (e.kind === "loaded") {
      set({ current: e.model, loadingPath: null, cancellingLoad: false });
      void get().refreshModels();
    } else if (e.kind === "unloaded") set({ current: null });
    else if (e.kind === "cancelled") {
      set({ loadingPath: null, progress: null, cancellingLoad: false, modelsNotice: `Loading ${e.path} was cancelled.` });
      void get().refreshModels();
    } else {
      set({ loadingPath: null, cancellingLoad: false, modelsError: `loading ${e.path} failed: ${e.message}` });
      void get().refreshModels();  // the previous model may still be loaded
    }
  },
});
