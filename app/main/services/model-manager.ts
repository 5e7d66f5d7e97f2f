// ModelManager: the app's ModelService. Holds the one current model and
// replaces it safely: a new file is checked first (a regular file, the native
// inspect, the runtime's pre-flight check of the load with these settings —
// its kernel packages, architecture, tensor types, shapes and memory, in the
// runtime's words (runtime-support.ts) — and a memory plan that fits), and
// only then does the current model make room: it stays loaded while the new
// one loads when both fit in memory, and is unloaded first only when memory
// requires it, in which case a failed (or cancelled) load loads it again and
// says so. It turns RuntimeHost's loadProgress events into
// `model.progress` (stage index of the 14), records each load's startup
// profile in the ProfileStore, and answers inspect with the memory plan for
// the settings given (shared/memory-plan.ts).
import { randomUUID } from "node:crypto";
import path from "node:path";

import {
  loadCancelledMessage, type EventSink, type FolderListing, type ModelFile, type ModelService, type ModelSummary,
} from "../../shared/app-contract.js";
import { planMemory, type MemoryPlan, type ModelShape } from "../../shared/memory-plan.js";
import { LOAD_STAGES, checkGpuPeers, checkSpeculative, type LoadedModel, type ModelLoadSettings, type StartupProfileJson } from "../../shared/runtime-contract.js";
import type { LoadCheck } from "../runtime/model.js";
import { isGpuChoice } from "../runtime/options.js";
import { parseShardName } from "./gguf-names.js";
import { liveMachineProbe, type MachineProbe } from "./machine-facts.js";
import { inspectFile, type InspectedModel, type ModelLibrary } from "./model-library.js";
import type { ModelLoadMemory } from "./model-load-memory.js";
import type { ProfileStore } from "./profile-store.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";
import { isMemoryRefusal, loadProblem, sessionShortfall } from "./runtime-support.js";
import { SafeFileError } from "./safe-file.js";

export interface ModelManagerOptions {
  /** RAM and GPU figures for the memory plan. Defaults to the live machine. */
  machine?: MachineProbe;
  /** The system's open-file dialog (Electron); absent: pickFile is refused (a browser tab has none). */
  pickFile?: () => Promise<string | null>;
  /** Where the settings of each successful load are remembered per model (absent: nothing is). */
  loadMemory?: ModelLoadMemory;
}

/** How the current model was loaded: what it takes to load it again. */
interface CurrentLoad {
  path: string;
  settings: ModelLoadSettings;
  onGpu: boolean;
}

const GiB = 2 ** 30;
const sizeText = (bytes: number) => (bytes >= GiB ? `${(bytes / GiB).toFixed(1)} GiB` : `${Math.max(0.1, bytes / 2 ** 20).toFixed(1)} MiB`);

export class ModelManager implements ModelService {
  private currentModel: LoadedModel | null = null;
  private currentLoad: CurrentLoad | null = null;
  private loading: Promise<LoadedModel> | null = null;
  /** Aborts the load in progress (before and during the runtime's load). */
  private loadController: AbortController | null = null;
  private readonly machine: MachineProbe;

  constructor(
    private readonly host: RuntimeHost,
    private readonly library: ModelLibrary,
    private readonly profiles: ProfileStore,
    private readonly emit: EventSink,
    private readonly defaults: ModelLoadSettings = {},
    private readonly options: ModelManagerOptions = {},
  ) {
    this.machine = options.machine ?? liveMachineProbe();
    library.setLastLoad((file) => options.loadMemory?.get(file) ?? null);
    // The library's list says what the same check says (at the default settings).
    library.setLoadCheck(async (file) => {
      const check = await host.checkLoad(file, sanitizeSettings({ ...defaults }));
      const problem = loadProblem(check, file);
      // A memory refusal depends on the moment and on the current model: the Inspect panel and the load say it.
      return problem === null || isMemoryRefusal(check) ? [] : [problem];
    });
  }

  /** Takes a model already loaded in the host (e.g. by `guild serve --model`) as the current one. */
  adopt(model: LoadedModel): void {
    this.currentModel = model;
    this.library.remember(model.path);
    const profile = this.recordProfile(model);
    this.currentLoad = { path: model.path, settings: {}, onGpu: profile ? usesGpu(profile) : false };
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

  /** The loaded model's file, or null. */
  currentPath(): string | null {
    return this.currentModel?.path ?? null;
  }

  async load(req: { path: string; settings?: ModelLoadSettings; ignoreMemory?: boolean }): Promise<LoadedModel> {
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
    /** The model unloaded to make room, while the new one loads: loaded again if that fails. */
    let madeRoom: { model: LoadedModel; load: CurrentLoad } | null = null;
    const run = async (): Promise<LoadedModel> => {
      try {
        // 1. Check the file before giving up anything for it.
        const old = this.currentModel;
        const keeps = old ? `; ${old.name} stays loaded` : "";
        let inspected: InspectedModel;
        try {
          inspected = await inspectFile(file);
        } catch (err) {
          const why = err instanceof SafeFileError ? err.reason : err instanceof Error ? err.message : String(err);
          throw new RuntimeError(`cannot load ${file}: ${why}${keeps}`, "invalid");
        }
        // The runtime's own answer for this load (its stages, nothing bound): refused now, nothing is given up.
        const check = await this.host.checkLoad(file, settings);
        const verdict = this.verdictOf(check, file);
        if (verdict.problem !== null) throw new RuntimeError(`cannot load ${file}: ${verdict.problem}${keeps}`, "invalid");
        const draft = draftProblem(check, settings);
        if (draft !== null) throw new RuntimeError(`cannot load ${file}: ${draft}${keeps}`, "invalid");
        if (controller.signal.aborted) throw cancelled();
        // 2. Memory: alongside the current model when both fit; in its place when only the new one does.
        const facts = await this.machine.facts();
        const plan = planMemory(shapeOf(inspected.shape, check), settings, facts);
        const oldBytes = old?.weightBytes ?? 0;
        // A GPU model holds device memory the new one's budget would lose: it goes first.
        const gpuClash = this.currentLoad?.onGpu === true && plan.gpu !== null;
        if (!req.ignoreMemory && plan.ramBytes > facts.ramAvailableBytes + oldBytes)
          throw new RuntimeError(`cannot load ${file}: ${memoryRefusal(plan, facts.ramAvailableBytes, old, oldBytes)}${keeps}`, "invalid");
        const alongside = old === null || (plan.fitsRam && !gpuClash && !verdict.needsRoom);
        if (controller.signal.aborted) throw cancelled();
        if (old && !alongside) {
          madeRoom = { model: old, load: this.currentLoad ?? { path: old.path, settings: {}, onGpu: false } };
          this.currentModel = null;
          this.currentLoad = null;
          await this.host.unloadModel(old.id);
          this.emit("model.state", { kind: "unloaded" });
          if (controller.signal.aborted) throw cancelled();
        }
        // 3. The runtime's load.
        const loaded = this.host.loadModel(file, settings, loadId);  // registers loadId at once
        controller.signal.addEventListener("abort", () => this.host.cancelLoad(loadId), { once: true });
        const model = await loaded;
        if (old && alongside && this.currentModel?.id === old.id) await this.host.unloadModel(old.id);
        this.currentModel = model;
        this.library.remember(file);
        // What the user chose (not the command line's defaults), offered the next time this model is picked.
        this.options.loadMemory?.remember(file, sanitizeSettings(req.settings ?? {}));
        const profile = this.recordProfile(model);
        this.currentLoad = { path: file, settings, onGpu: profile ? usesGpu(profile) : false };
        if (profile) this.emit("profiles.changed", { recent: await this.profiles.recent().catch(() => []) });
        this.emit("model.state", { kind: "loaded", model });
        return model;
      } catch (err) {
        const restored = madeRoom ? await this.restore(madeRoom) : null;
        const again = madeRoom === null ? ""
          : restored instanceof Error ? `; ${madeRoom.model.name}, unloaded to make room, could not be loaded again: ${restored.message}`
          : `; ${madeRoom.model.name}, unloaded to make room, was loaded again`;
        const restoredModel = restored instanceof Error || restored === null ? {} : { restored };
        if (controller.signal.aborted) {
          this.emit("model.state", { kind: "cancelled", path: file, ...restoredModel });
          throw cancelled();
        }
        const why = err instanceof Error ? err.message : String(err);
        const message = why + again;
        this.emit("model.state", { kind: "failed", path: file, message, ...restoredModel });
        throw err instanceof RuntimeError ? new RuntimeError(message, err.code) : new RuntimeError(message, "failed");
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

  /** The kernel packages changed: the list's checks are made again. */
  packagesChanged(): void {
    this.library.forgetLoadChecks();
  }

  /**
   * The check's verdict for a load now: the runtime's reason it would fail, or null; needsRoom when
   * only memory stands in the way and unloading the current model is what frees it (its session
   * memory or its GPU), so the new model must not load next to it.
   */
  private verdictOf(check: LoadCheck, file: string): { problem: string | null; needsRoom: boolean } {
    const problem = loadProblem(check, file);
    if (problem === null) return { problem: null, needsRoom: false };
    const old = this.currentModel;
    if (old === null || !isMemoryRefusal(check)) return { problem, needsRoom: false };
    const session = sessionShortfall(check);
    const freed = session ? session.needBytes <= session.availableBytes + old.weightBytes : this.currentLoad?.onGpu === true;
    return freed ? { problem: null, needsRoom: true } : { problem: `${problem} (even with ${old.name} unloaded)`, needsRoom: false };
  }

  /** Loads the model that made room for a failed load again, as it was loaded. */
  private async restore(room: { model: LoadedModel; load: CurrentLoad }): Promise<LoadedModel | Error> {
    try {
      const model = await this.host.loadModel(room.load.path, room.load.settings, randomUUID());
      this.currentModel = model;
      this.currentLoad = room.load;
      this.recordProfile(model);
      return model;
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
  }

  /** Saves a load's startup profile and shows its GPU figures to the memory plan; null when there is none. */
  private recordProfile(model: LoadedModel): StartupProfileJson | null {
    let profile: StartupProfileJson;
    try {
      profile = this.host.profile(model.id);
    } catch {
      return null;  // no profile: nothing to record
    }
    this.machine.observe(profile);
    try {
      this.profiles.add(profile, model.path);
    } catch {
      // a profile that cannot be saved does not fail the load
    }
    return profile;
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
    this.currentLoad = null;
    const unloaded = await this.host.unloadModel(m.id);
    this.emit("model.state", { kind: "unloaded" });
    return { unloaded };
  }

  async profile(): Promise<StartupProfileJson | null> {
    return this.currentModel ? this.host.profile(this.currentModel.id) : null;
  }

  async inspect(req: { path: string; settings?: ModelLoadSettings }): Promise<ModelSummary> {
    const settings = sanitizeSettings({ ...this.defaults, ...(req.settings ?? {}) });
    const file = req.path.trim();
    try {
      const inspected = await inspectFile(file, settings.contextSize || this.currentModel?.contextSize || undefined);
      // The problems are the check's, for these settings: what load() would refuse on.
      const check = await this.host.checkLoad(file, settings);
      const problems = [this.verdictOf(check, file).problem, draftProblem(check, settings)].filter((p): p is string => p !== null);
      const shape = shapeOf(inspected.shape, check);
      const machine = await this.machine.facts();
      const lastLoad = this.options.loadMemory?.get(file) ?? null;
      return { ...inspected, problems, shape, machine, plan: planMemory(shape, settings, machine), lastLoad };
    } catch (err) {
      throw new RuntimeError(err instanceof SafeFileError ? err.message : err instanceof Error ? err.message : String(err), "invalid");
    }
  }

  async browse(req: { dir?: string }): Promise<FolderListing> {
    return this.library.browse(req.dir);
  }

  async pickFile(): Promise<{ path: string | null }> {
    if (!this.options.pickFile) throw new RuntimeError("a browser tab cannot open this computer's file dialog: use Browse… (the models folder and your home folder)", "invalid");
    return { path: await this.options.pickFile() };
  }

  async remove(req: { path: string }): Promise<{ removed: string[] }> {
    const loaded = this.currentModel?.path;
    if (loaded && sameModel(loaded, req.path)) throw new RuntimeError(`${path.basename(req.path)} is the loaded model: unload it first`, "busy");
    if (this.loading) throw new RuntimeError("a model is loading: wait for it first", "busy");
    const removed = await this.library.remove(req.path);
    this.emit("models.changed", { files: await this.library.list() });
    return { removed };
  }

  /** Waits for a load in progress (shutdown, tests). */
  async settled(): Promise<void> {
    await this.loading?.catch(() => undefined);
  }
}

/** The same file, or two shards of one split model. */
function sameModel(a: string, b: string): boolean {
  const ra = path.resolve(a);
  const rb = path.resolve(b);
  if (ra === rb) return true;
  const sa = parseShardName(path.basename(ra));
  const sb = parseShardName(path.basename(rb));
  return sa !== null && sb !== null && path.dirname(ra) === path.dirname(rb) && sa.stem === sb.stem && sa.count === sb.count;
}

/** The plan's shape with the weight bytes the runtime's check counted (the inspect's are estimated from the file). */
function shapeOf(shape: ModelShape, check: LoadCheck): ModelShape {
  const { denseBytes, expertBytes } = check.estimate;
  return denseBytes !== undefined && expertBytes !== undefined ? { ...shape, denseBytes, expertBytes } : shape;
}

/**
 * Draft "mtp" asks for the model's MTP block: the check's session_state says whether this load's
 * sessions would have one to draft with ("mtp: …", else "none (why)"). Null when nothing stands in the way.
 */
function draftProblem(check: LoadCheck, settings: ModelLoadSettings): string | null {
  if (settings.draft !== "mtp" || !check.ok) return null;
  const stages = (check.profile as { stages?: { name?: unknown; detail?: Record<string, unknown> }[] } | null)?.stages;
  const drafter = stages?.find((s) => s.name === "session_state")?.detail?.["drafter"];
  if (typeof drafter !== "string" || drafter.startsWith("mtp")) return null;  // no word: the load itself decides
  return /CPU executor only/.test(drafter)
    ? 'draft "mtp": MTP drafting runs on the CPU executor only and this model would decode on the GPU (choose draft Auto or None, or the CPU)'
    : 'draft "mtp": the model has no MTP (nextn) block to draft with (choose draft Auto or None)';
}

/** True when the load's device_policy found a GPU to use. */
function usesGpu(profile: StartupProfileJson): boolean {
  const g = profile.stages.find((s) => s.name === "device_policy")?.detail["gpu"];
  return typeof g === "object" && g !== null;
}

function memoryRefusal(plan: MemoryPlan, available: number, old: LoadedModel | null, oldBytes: number): string {
  const after = old ? ` (about ${sizeText(available + oldBytes)} with ${old.name} unloaded)` : "";
  return `it needs about ${sizeText(plan.ramBytes)} of RAM with these settings and ${sizeText(available)} is available${after}; ` +
    "try a smaller context, experts on the GPU, a smaller quantization, or Load anyway";
}

/** The check of a load request's settings (and of remembered ones): the known fields, each in range; throws one line naming the field. */
export function sanitizeSettings(s: ModelLoadSettings): ModelLoadSettings {
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
  // Speculative decoding (docs/SPECULATIVE.md): the defaults of the model's generations.
  const speculative = checkSpeculative(s as Readonly<Record<string, unknown>>);
  if (!speculative.ok) throw new RuntimeError(speculative.message, "invalid");
  Object.assign(out, speculative.settings);
  return out;
}
