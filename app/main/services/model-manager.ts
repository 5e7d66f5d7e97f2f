// ModelManager: the app's ModelService. Holds the one current model (a load
// replaces it), turns RuntimeHost's loadProgress events into `model.progress`
// (stage index of the 14), records each load's startup profile in the
// ProfileStore, and answers inspect through ModelLibrary.
import { isGpuChoice } from "../runtime/options.js";
import { randomUUID } from "node:crypto";

import { loadCancelledMessage, type EventSink, type ModelFile, type ModelService, type ModelSummary } from "../../shared/app-contract.js";
import { LOAD_STAGES, checkGpuPeers, type LoadedModel, type ModelLoadSettings, type StartupProfileJson } from "../../shared/runtime-contract.js";
import { inspectModel } from "../runtime/model.js";
import { requireModelFile, type ModelLibrary } from "./model-library.js";
import type { ProfileStore } from "./profile-store.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";
import { SafeFileError } from "./safe-file.js";

export class ModelManager implements ModelService {
  private currentModel: LoadedModel | null = null;
  private loading: Promise<LoadedModel> | null = null;
  /** Aborts the load in progress (before and during the runtime's load). */
  private loadController: AbortController | null = null;

  constructor(
    private readonly host: RuntimeHost,
    private readonly library: ModelLibrary,
    private readonly profiles: ProfileStore,
    private readonly emit: EventSink,
    private readonly defaults: ModelLoadSettings = {},
  ) {}

  /** Takes a model already loaded in the host (e.g. by `guild serve --model`) as the current one. */
  adopt(model: LoadedModel): void {
    this.currentModel = model;
    this.library.remember(model.path);
    try {
      this.profiles.add(this.host.profile(model.id), model.path);
    } catch {
      // no profile: nothing to record
    }
  }

  async list(): Promise<ModelFile[]> {
    return this.library.list();
  }

  /** The loaded model, or a clear error when none is. */
  requireCurrent(): LoadedModel {
    if (!this.currentModel) throw new RuntimeError(this.loading ? "the model is still loading" : "no model is loaded; load one on the Models page", "invalid");
    return this.currentModel;
  }

  async current(): Promise<LoadedModel | null> {
    return this.currentModel;
  }

  async load(req: { path: string; settings?: ModelLoadSettings }): Promise<LoadedModel> {
    if (this.loading) throw new RuntimeError("a model is already loading", "busy");
    const file = req.path.trim();
    if (file.length === 0) throw new RuntimeError("a model path is required", "invalid");
    const settings = sanitizeSettings({ ...this.defaults, ...(req.settings ?? {}) });
    const loadId = randomUUID();
    const controller = new AbortController();
    const cancelled = () => new RuntimeError(loadCancelledMessage, "cancelled");
    const off = this.host.subscribe((e) => {
      if (e.type !== "loadProgress" || e.loadId !== loadId) return;
      const i = (LOAD_STAGES as readonly string[]).indexOf(e.stage);
      this.emit("model.progress", { path: file, stage: e.stage, stageIndex: i + 1, stageCount: LOAD_STAGES.length, fraction: e.fraction });
    });
    this.emit("model.state", { kind: "loading", path: file });
    const run = async (): Promise<LoadedModel> => {
      try {
        // Check the file before giving up the current model for it.
        try {
          await requireModelFile(file);
          await inspectModel(file);
        } catch (err) {
          const why = err instanceof SafeFileError ? err.reason : err instanceof Error ? err.message : String(err);
          throw new RuntimeError(`cannot load ${file}: ${why}`, "invalid");
        }
        if (controller.signal.aborted) throw cancelled();
        if (this.currentModel) {
          const old = this.currentModel;
          this.currentModel = null;
          await this.host.unloadModel(old.id);
        }
        if (controller.signal.aborted) throw cancelled();
        const loaded = this.host.loadModel(file, settings, loadId);  // registers loadId at once
        controller.signal.addEventListener("abort", () => this.host.cancelLoad(loadId), { once: true });
        const model = await loaded;
        this.currentModel = model;
        this.library.remember(file);
        try {
          this.profiles.add(this.host.profile(model.id), file);
          this.emit("profiles.changed", { recent: await this.profiles.recent() });
        } catch {
          // a profile that cannot be saved does not fail the load
        }
        this.emit("model.state", { kind: "loaded", model });
        return model;
      } catch (err) {
        if (controller.signal.aborted) {
          this.emit("model.state", { kind: "cancelled", path: file });
          throw cancelled();
        }
        const message = err instanceof Error ? err.message : String(err);
        this.emit("model.state", { kind: "failed", path: file, message });
        throw err;
      } finally {
        off();
        this.loading = null;
        this.loadController = null;
      }
    };
    this.loadController = controller;
    this.loading = run();
    return this.loading;
  }

  async cancelLoad(): Promise<{ cancelled: boolean }> {
    const c = this.loadController;
    if (!c || c.signal.aborted) return { cancelled: false };
    c.abort();
    return { cancelled: true };
  }

  async unload(): Promise<{ unloaded: boolean }> {
    const m = this.currentModel;
    if (!m) return { unloaded: false };
    this.currentModel = null;
    const unloaded = await this.host.unloadModel(m.id);
    this.emit("model.state", { kind: "unloaded" });
    return { unloaded };
  }

  async profile(): Promise<StartupProfileJson | null> {
    return this.currentModel ? this.host.profile(this.currentModel.id) : null;
  }

  async inspect(req: { path: string }): Promise<ModelSummary> {
    try {
      return await this.library.inspect(req.path, this.currentModel?.contextSize || undefined);
    } catch (err) {
      throw new RuntimeError(err instanceof Error ? err.message : String(err), "invalid");
    }
  }

  /** Waits for a load in progress (shutdown, tests). */
  async settled(): Promise<void> {
    await this.loading?.catch(() => undefined);
  }
}

function sanitizeSettings(s: ModelLoadSettings): ModelLoadSettings {
  const out: ModelLoadSettings = {};
  const int = (v: unknown, max: number) => typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= max;
  if (s.threads !== undefined) {
    if (!int(s.threads, 1024)) throw new RuntimeError("threads must be a whole number from 0 to 1024", "invalid");
    out.threads = s.threads;
  }
  if (s.contextSize !== undefined) {
    if (!int(s.contextSize, 1 << 20)) throw new RuntimeError("contextSize must be a whole number of tokens", "invalid");
    out.contextSize = s.contextSize;
  }
  if (s.kvCacheType !== undefined) {
    if (s.kvCacheType !== "f16" && s.kvCacheType !== "f32") throw new RuntimeError("kvCacheType must be f16 or f32", "invalid");
    out.kvCacheType = s.kvCacheType;
  }
  if (s.gpu !== undefined) {
    if (typeof s.gpu !== "string" || !isGpuChoice(s.gpu)) throw new RuntimeError('gpu must be "auto", "cpu" or "cuda:N"', "invalid");
    out.gpu = s.gpu;
  }
  if (s.gpuBudgetGiB !== undefined) {
    if (typeof s.gpuBudgetGiB !== "number" || !Number.isFinite(s.gpuBudgetGiB) || s.gpuBudgetGiB <= 0 || s.gpuBudgetGiB > 1 << 20)
      throw new RuntimeError("gpuBudgetGiB must be a positive number of GiB", "invalid");
    out.gpuBudgetGiB = s.gpuBudgetGiB;
  }
  if (s.expertsOnCpu !== undefined) {
    if (typeof s.expertsOnCpu !== "boolean") throw new RuntimeError("expertsOnCpu must be true or false", "invalid");
    out.expertsOnCpu = s.expertsOnCpu;
  }
  // Peer GPUs (docs/CUDA.md, "Several GPUs"), checked like `--gpu-peers` (cli/gpu-flag.ts): "" = none.
  if (s.gpuPeers !== undefined) {
    const malformed = 'gpuPeers must be "cuda:N" entries separated by commas';
    if (typeof s.gpuPeers !== "string" || s.gpuPeers.length > 1000) throw new RuntimeError(malformed, "invalid");
    const check = checkGpuPeers(s.gpuPeers, out.gpu);
    if (!check.ok) {
      const why = check.problem === "malformed" ? malformed
        : check.problem === "twice" ? `gpuPeers names ${check.entry} twice`
        : check.problem === "primary" ? `gpuPeers: ${check.entry} is the primary device (gpu)`
        : 'gpuPeers need a GPU: they cannot go with gpu "cpu"';
      throw new RuntimeError(why, "invalid");
    }
    if (check.peers.length > 0) out.gpuPeers = check.peers.join(",");
  }
  if (s.gpuPeerBudgetGiB !== undefined) {
    if (typeof s.gpuPeerBudgetGiB !== "number" || !Number.isFinite(s.gpuPeerBudgetGiB) || s.gpuPeerBudgetGiB <= 0 || s.gpuPeerBudgetGiB > 1 << 20)
      throw new RuntimeError("gpuPeerBudgetGiB must be a positive number of GiB", "invalid");
    if (out.gpuPeers === undefined) throw new RuntimeError("gpuPeerBudgetGiB needs gpuPeers", "invalid");
    out.gpuPeerBudgetGiB = s.gpuPeerBudgetGiB;
  }
  return out;
}
