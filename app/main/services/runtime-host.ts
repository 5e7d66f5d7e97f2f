// RuntimeHost: owns the loaded models, their sessions and the generation
// queue, and publishes typed events (load progress, queue position, tokens,
// done, errors). Plain TypeScript, no Electron import: the desktop shell, the
// CLI's `serve` and the API server all drive it, through the message contract
// in app/shared/runtime-contract.ts (dispatch + subscribe), so it could move
// to a separate process later.
import { randomUUID } from "node:crypto";
import path from "node:path";

import { loadCancelledMessage } from "../../shared/app-contract.js";
import {
  checkSpeculative,
  defaultAppDraft,
  reasoningEfforts,
  type ChatMessage,
  type GenerationInput,
  type GenerationRequest,
  type GenerationResult,
  type LoadedModel,
  type LoadId,
  type ModelId,
  type ModelLoadSettings,
  type QueueState,
  type RequestId,
  type RuntimeCommand,
  type RuntimeEvent,
  type RuntimeReply,
  type SessionId,
  type SpeculativeSettings,
  type StartupProfileJson,
  type StopReason,
} from "../../shared/runtime-contract.js";
import { ChatTemplateError, chatPromptTokens } from "../runtime/chat-template.js";
import { checkModelLoad, GuildModel, type LoadCheck } from "../runtime/model.js";
import type { GenerateOptions, LoadCheckOptions } from "../runtime/options.js";
import { pacedGenerate, type TokenPacing } from "../runtime/paced-generate.js";
import type { NativeError } from "../runtime/native-types.js";
import type { GuildSession } from "../runtime/session.js";

/** A request the runtime refuses (bad arguments, unknown ids, busy sessions). */
export class RuntimeError extends Error {
  constructor(
    message: string,
    readonly code: "not_found" | "invalid" | "busy" | "cancelled" | "queue_full" | "failed" = "failed",
    /** The request field at fault, when one is (a GenerationRequest's or its `speculative`'s, e.g. "draft"). */
    readonly field?: string,
  ) {
    super(message);
    this.name = "RuntimeError";
  }
}

interface Waiter {
  requestId: RequestId;
  admit: () => void;
}

interface ModelEntry {
  model: GuildModel;
  info: LoadedModel;
  // The host's own FIFO in front of the native one: JS callers are admitted in
  // call order (the addon's worker threads would otherwise race to the native
  // queue), and a waiting request holds no worker thread.
  running: RequestId | null;
  waiting: Waiter[];
}

interface SessionEntry {
  modelId: ModelId;
  session: GuildSession;
  busy: boolean;
}

interface RequestEntry {
  modelId: ModelId;
  controller: AbortController;
  done: Promise<unknown>;
}

export type RuntimeListener = (event: RuntimeEvent) => void;

export interface RuntimeHostOptions {
  /** Requests that may wait behind the running one, per model. Defaults to {@link defaultMaxQueued}. */
  maxQueued?: number;
  /**
   * Test-only: generate a few tokens at a time with a pause between steps, so
   * end-to-end tests can stop a reply midway however fast the model is. Never
   * set by the app, the CLI or `guild serve`.
   */
  testPacing?: TokenPacing;
  /**
   * The user's kernel packages directory every load reads (stage 2; the bundled packages are searched too).
   * A host setting, not a per-load one: which libraries get loaded is the machine owner's choice.
   * Absent: $GUILD_PACKAGES_DIR, else the user's data directory.
   */
  packagesDir?: string;
}

export const defaultMaxQueued = 32 satisfies NonNullable<RuntimeHostOptions["maxQueued"]>;

export class RuntimeHost {
  private readonly maxQueued: number;
  private readonly pacing: TokenPacing | undefined;
  private readonly packagesDir: string | undefined;
  private readonly models = new Map<ModelId, ModelEntry>();
  private readonly sessions = new Map<SessionId, SessionEntry>();
  private readonly requests = new Map<RequestId, RequestEntry>();
  private readonly loads = new Map<LoadId, AbortController>();
  private readonly listeners = new Set<RuntimeListener>();

  constructor(options: RuntimeHostOptions = {}) {
    this.maxQueued = options.maxQueued ?? defaultMaxQueued;
    this.pacing = options.testPacing;
    this.packagesDir = options.packagesDir;
  }

  /** Receives every event; returns the unsubscribe function. */
  subscribe(listener: RuntimeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The message contract: one command in, its reply out (errors reject). */
  async dispatch<C extends RuntimeCommand>(command: C): Promise<RuntimeReply<C>> {
    const c = command as RuntimeCommand;
    let reply: unknown;
    switch (c.type) {
      case "loadModel": reply = await this.loadModel(c.path, c.settings ?? {}, c.loadId); break;
      case "cancelLoad": reply = { cancelled: this.cancelLoad(c.loadId) }; break;
      case "unloadModel": reply = { unloaded: await this.unloadModel(c.modelId) }; break;
      case "listModels": reply = this.listModels(); break;
      case "createSession": reply = { sessionId: await this.createSession(c.modelId) }; break;
      case "closeSession": reply = { closed: this.closeSession(c.sessionId) }; break;
      case "generate": reply = await this.generate(c.request, c.requestId); break;
      case "cancel": reply = { cancelled: this.cancel(c.requestId) }; break;
      case "profile": reply = this.profile(c.modelId); break;
      case "queueState": reply = this.queueState(c.modelId); break;
      default: throw new RuntimeError(`unknown command ${JSON.stringify((c as { type?: unknown }).type)}`, "invalid");
    }
    return reply as RuntimeReply<C>;
  }

  async loadModel(file: string, settings: ModelLoadSettings = {}, loadId: LoadId = randomUUID()): Promise<LoadedModel> {
    if (typeof file !== "string" || file.length === 0) throw new RuntimeError("a model path is required", "invalid");
    if (this.loads.has(loadId)) throw new RuntimeError(`load ${loadId} is already running`, "busy");
    const speculative = speculativeOf(settings);
    const controller = new AbortController();
    this.loads.set(loadId, controller);
    try {
      const model = await GuildModel.load(file, {
        ...this.loadOptions(settings),
        onProgress: (stage, fraction) => this.emit({ type: "loadProgress", loadId, path: file, stage, fraction }),
        signal: controller.signal,
      });
      const info = describe(randomUUID(), file, model, speculative);
      if (speculative.draft === "mtp" && info.drafter !== "mtp") {
        const why = noDrafterReason(model);
        model.dispose();
        throw new RuntimeError(`${file}: draft "mtp": ${why}; load it with draft "auto" or "none"`, "invalid", "draft");
      }
      this.models.set(info.id, { model, info, running: null, waiting: [] });
      this.emit({ type: "modelLoaded", loadId, model: info });
      return info;
    } catch (err) {
      const message = controller.signal.aborted ? loadCancelledMessage : errorMessage(err);
      this.emit({ type: "error", loadId, message });
      if (controller.signal.aborted) throw new RuntimeError(message, "cancelled");
      throw err instanceof RuntimeError ? err : new RuntimeError(message, "failed");
    } finally {
      this.loads.delete(loadId);
    }
  }

  /**
   * The runtime's pre-flight check of loadModel(file, settings): the same options (this host's
   * kernel packages folder included), the load's own stages, nothing loaded (runtime/model.ts).
   */
  async checkLoad(file: string, settings: ModelLoadSettings = {}): Promise<LoadCheck> {
    if (typeof file !== "string" || file.length === 0) throw new RuntimeError("a model path is required", "invalid");
    try {
      return await checkModelLoad(file, this.loadOptions(settings));
    } catch (err) {
      throw new RuntimeError(errorMessage(err), "invalid");  // only malformed options reject
    }
  }

  /** A load's runtime options from the app's settings and this host's packages folder. */
  private loadOptions(settings: ModelLoadSettings): LoadCheckOptions {
    return {
      ...(settings.threads !== undefined ? { threads: settings.threads } : {}),
      ...(settings.contextSize !== undefined ? { contextSize: settings.contextSize } : {}),
      ...(settings.kvCacheType !== undefined ? { kvCacheType: settings.kvCacheType } : {}),
      ...(settings.gpu !== undefined ? { gpu: settings.gpu } : {}),
      ...(settings.gpuBudgetGiB !== undefined ? { gpuBudgetGiB: settings.gpuBudgetGiB } : {}),
      ...(settings.expertsOnCpu !== undefined ? { expertsOnCpu: settings.expertsOnCpu } : {}),
      ...(settings.gpuPeers !== undefined ? { gpuPeers: settings.gpuPeers } : {}),
      ...(settings.gpuPeerBudgetGiB !== undefined ? { gpuPeerBudgetGiB: settings.gpuPeerBudgetGiB } : {}),
      ...(this.packagesDir !== undefined ? { packagesDir: this.packagesDir } : {}),
    };
  }

  cancelLoad(loadId: LoadId): boolean {
    const c = this.loads.get(loadId);
    if (!c) return false;
    c.abort(new RuntimeError(loadCancelledMessage, "cancelled"));
    return true;
  }

  /** Cancels the model's generations, waits for them, then frees it. */
  async unloadModel(modelId: ModelId): Promise<boolean> {
    const entry = this.models.get(modelId);
    if (!entry) return false;
    this.models.delete(modelId);
    const pending: Promise<unknown>[] = [];
    for (const r of this.requests.values()) {
      if (r.modelId !== modelId) continue;
      r.controller.abort();
      pending.push(r.done.catch(() => undefined));
    }
    await Promise.all(pending);
    for (const [id, s] of this.sessions) {
      if (s.modelId !== modelId) continue;
      s.session.dispose();
      this.sessions.delete(id);
    }
    entry.model.dispose();
    this.emit({ type: "modelUnloaded", modelId });
    return true;
  }

  listModels(): LoadedModel[] {
    return [...this.models.values()].map((m) => ({ ...m.info, ready: m.model.ready }));
  }

  async createSession(modelId: ModelId): Promise<SessionId> {
    const entry = this.model(modelId);
    const session = await entry.model.createSession();
    const id = randomUUID();
    this.sessions.set(id, { modelId, session, busy: false });
    return id;
  }

  closeSession(sessionId: SessionId): boolean {
    const s = this.sessions.get(sessionId);
    if (!s) return false;
    if (s.busy) throw new RuntimeError(`session ${sessionId} is generating; cancel it first`, "busy");
    s.session.dispose();
    this.sessions.delete(sessionId);
    return true;
  }

  profile(modelId: ModelId): StartupProfileJson {
    return this.model(modelId).model.startupProfile() as unknown as StartupProfileJson;
  }

  /**
   * The prompt tokens of a chat on a loaded model, exactly as `generate` would
   * make them from `{ kind: "chat", messages }` (its chat template, generation
   * prompt added). ChatService measures its history with it to shift the
   * context, then generates from the tokens.
   */
  async chatPrompt(modelId: ModelId, messages: ChatMessage[], signal: AbortSignal = new AbortController().signal): Promise<number[]> {
    return this.promptTokens(this.model(modelId).model, { kind: "chat", messages }, signal);
  }

  queueState(modelId: ModelId): QueueState {
    const e = this.model(modelId);
    return {
      modelId,
      length: e.waiting.length + (e.running ? 1 : 0),
      running: e.running,
      waiting: e.waiting.map((w) => w.requestId),
    };
  }

  /** Cancels a running generation or takes a waiting one out of the queue. */
  cancel(requestId: RequestId): boolean {
    const r = this.requests.get(requestId);
    if (!r) return false;
    r.controller.abort();
    return true;
  }

  /**
   * Runs one generation; resolves when it ends (stop reason "cancel" when
   * cancelled). Emits queued/started/token/done events tagged with requestId.
   */
  async generate(request: GenerationRequest, requestId: RequestId = randomUUID()): Promise<GenerationResult> {
    if (this.requests.has(requestId)) throw new RuntimeError(`request ${requestId} already exists`, "invalid");
    const entry = this.model(request.modelId);
    const stops = (request.stop ?? []).filter((s) => typeof s === "string" && s.length > 0);
    // The request's speculative settings over the model's (its load settings), checked before anything is reserved.
    const speculative = { ...entry.info.speculative, ...speculativeOf(request.speculative ?? {}) };
    const draft = speculative.draft ?? defaultAppDraft;
    if (draft === "mtp" && entry.info.drafter !== "mtp")
      throw new RuntimeError(`draft "mtp": ${noDrafterReason(entry.model)} (use draft "auto" or "none")`, "invalid", "draft");
    let sessionEntry: SessionEntry | undefined;
    let ownSession: GuildSession | undefined;
    if (request.sessionId !== undefined) {
      sessionEntry = this.sessions.get(request.sessionId);
      if (!sessionEntry || sessionEntry.modelId !== request.modelId)
        throw new RuntimeError(`unknown session ${request.sessionId} for model ${request.modelId}`, "not_found");
      if (sessionEntry.busy) throw new RuntimeError(`session ${request.sessionId} is already generating`, "busy");
    }
    const controller = new AbortController();
    // Bad input throws here, before anything is reserved. A chat prompt comes
    // later: it renders off the event loop (the model's untrusted template),
    // so the request is registered meanwhile, for a cancel or an unload to
    // reach it. Token and text prompts are ready at once, so those requests
    // join the model's FIFO in call order.
    const prompt = this.promptTokens(entry.model, request.input, controller.signal);
    if (sessionEntry) sessionEntry.busy = true;
    const run = async (promptTokens: number[]): Promise<GenerationResult> => {
      if (!(await this.admit(entry, requestId, controller.signal))) {
        return cancelledResult(requestId, request.modelId, promptTokens);
      }
      const decoder = new TextDecoder("utf-8");
      let text = "";
      let emitted = 0;
      let stopped = false;
      const flush = (id: number, final: boolean) => {
        // Hold back a tail that could still grow into a stop string.
        const safe = final ? text.length : text.length - stopOverlap(text, stops);
        if (safe > emitted) {
          this.emit({ type: "token", requestId, id, text: text.slice(emitted, safe) });
          emitted = safe;
        }
      };
      try {
        const session = sessionEntry?.session ?? (ownSession = await entry.model.createSession());
        const s = request.sampling ?? {};
        const options: GenerateOptions = {
          ...(s.maxTokens !== undefined ? { maxNewTokens: s.maxTokens } : {}),
          ...(s.temperature !== undefined ? { temperature: s.temperature } : {}),
          ...(s.topK !== undefined ? { topK: s.topK } : {}),
          ...(s.topP !== undefined ? { topP: s.topP } : {}),
          ...(s.minP !== undefined ? { minP: s.minP } : {}),
          ...(s.repeatPenalty !== undefined ? { repeatPenalty: s.repeatPenalty } : {}),
          ...(s.seed !== undefined ? { seed: s.seed } : {}),
          draft,
          ...(speculative.specMax !== undefined ? { specMax: speculative.specMax } : {}),
          ...(speculative.specMinP !== undefined ? { specMinP: speculative.specMinP } : {}),
          ...(speculative.specRule !== undefined ? { specRule: speculative.specRule } : {}),
          signal: controller.signal,
          onToken: (token) => {
            if (stopped) return;
            text += decoder.decode(token.piece, { stream: true });
            const hit = firstStop(text, stops);
            if (hit >= 0) {
              text = text.slice(0, hit);
              stopped = true;
              flush(token.id, true);
              controller.abort();
              return;
            }
            flush(token.id, false);
          },
        };
        const result = this.pacing ? await pacedGenerate(session, promptTokens, options, this.pacing)
          : await session.generate(promptTokens, options);
        if (!stopped) {
          text += decoder.decode();
          flush(result.tokens.at(-1) ?? -1, true);
        }
        const stopReason: StopReason = stopped ? "stop" : result.stopReason;
        const seconds = (ms: number) => Math.max(ms, 1e-6) / 1000;
        const done: GenerationResult = {
          requestId,
          modelId: request.modelId,
          text,
          tokens: result.tokens,
          promptTokens,
          stopReason,
          stats: {
            promptTokens: promptTokens.length,
            reusedPromptTokens: result.promptTokensReused,
            generatedTokens: result.tokens.length,
            promptTokensPerSecond: result.promptTokensComputed / seconds(result.promptMs),
            decodeTokensPerSecond: result.tokens.length > 1 ? (result.tokens.length - 1) / seconds(result.decodeMs) : 0,
            ttftMs: result.ttftMs,
            queueMs: result.queueMs,
            draftTokens: result.draftTokens,
            acceptedDraftTokens: result.acceptedDraftTokens,
            windows: result.windows,
            drafter: result.draftedByMtp ? "mtp" : "none",
          },
        };
        this.emit({ type: "done", result: done });
        return done;
      } catch (err) {
        const message = errorMessage(err);
        this.emit({ type: "error", requestId, message });
        // The runtime refused the request's arguments (say, draft "mtp" where the session cannot draft): the caller's to fix.
        throw new RuntimeError(message, (err as NativeError | null)?.code === "invalid_argument" ? "invalid" : "failed");
      } finally {
        ownSession?.dispose();
        this.release(entry, requestId);
      }
    };
    const start = (prompt: number[]): Promise<GenerationResult> => {
      if (controller.signal.aborted) return Promise.resolve(cancelledResult(requestId, request.modelId, prompt));
      if (entry.running !== null && entry.waiting.length >= this.maxQueued)
        throw new RuntimeError(`queue full: ${entry.waiting.length} requests are already waiting for this model`, "queue_full");
      return run(prompt);
    };
    const prepareAndRun = async (): Promise<GenerationResult> => {
      if (Array.isArray(prompt)) return start(prompt);
      let tokens: number[];
      try {
        tokens = await prompt;
      } catch (err) {
        if (controller.signal.aborted) return cancelledResult(requestId, request.modelId, []);
        throw err;
      }
      return start(tokens);
    };
    const done = prepareAndRun().finally(() => {
      if (sessionEntry) sessionEntry.busy = false;
      this.requests.delete(requestId);
    });
    this.requests.set(requestId, { modelId: request.modelId, controller, done });
    return done;
  }

  /** Waits for the request's turn on its model; false when cancelled while waiting. */
  private admit(entry: ModelEntry, requestId: RequestId, signal: AbortSignal): Promise<boolean> {
    const modelId = entry.info.id;
    if (signal.aborted) return Promise.resolve(false);
    if (entry.running === null && entry.waiting.length === 0) {
      entry.running = requestId;
      this.emit({ type: "started", requestId, modelId });
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const onAbort = () => {
        entry.waiting = entry.waiting.filter((w) => w !== waiter);
        this.announcePositions(entry);
        resolve(false);
      };
      const waiter: Waiter = {
        requestId,
        admit: () => {
          signal.removeEventListener("abort", onAbort);
          entry.running = requestId;
          this.emit({ type: "started", requestId, modelId });
          resolve(true);
        },
      };
      entry.waiting.push(waiter);
      signal.addEventListener("abort", onAbort, { once: true });
      this.emit({ type: "queued", requestId, modelId, position: entry.waiting.length });
    });
  }

  /** Ends the running request's turn and admits the next one. */
  private release(entry: ModelEntry, requestId: RequestId): void {
    if (entry.running !== requestId) return;
    entry.running = null;
    const next = entry.waiting.shift();
    if (next) {
      next.admit();
      this.announcePositions(entry);
    }
  }

  /** Tells every waiting request its (new) number of requests ahead. */
  private announcePositions(entry: ModelEntry): void {
    entry.waiting.forEach((w, i) =>
      this.emit({ type: "queued", requestId: w.requestId, modelId: entry.info.id, position: i + (entry.running ? 1 : 0) }));
  }

  /** Frees everything (cancels generations first). */
  async dispose(): Promise<void> {
    for (const id of [...this.models.keys()]) await this.unloadModel(id);
    for (const c of this.loads.values()) c.abort();
    this.listeners.clear();
  }

  private model(modelId: ModelId): ModelEntry {
    const e = this.models.get(modelId);
    if (!e) throw new RuntimeError(`no loaded model with id ${modelId}`, "not_found");
    return e;
  }

  /** The prompt's tokens; a chat prompt's come later (its template renders in a worker). Throws "invalid" for bad input. */
  private promptTokens(model: GuildModel, input: GenerationInput, signal: AbortSignal): number[] | Promise<number[]> {
    switch (input?.kind) {
      case "tokens": {
        const vocab = model.vocabSize;
        if (!Array.isArray(input.tokens) || input.tokens.length === 0 ||
            !input.tokens.every((t) => Number.isInteger(t) && t >= 0 && t < vocab))
          throw new RuntimeError(`tokens must be a non-empty list of ids in [0, ${vocab})`, "invalid");
        return [...input.tokens];
      }
      case "text": {
        if (typeof input.text !== "string") throw new RuntimeError("text must be a string", "invalid");
        const tokens = model.tokenize(input.text, { addSpecial: true, parseSpecial: true });
        if (tokens.length === 0) throw new RuntimeError("the prompt is empty", "invalid");
        return tokens;
      }
      case "chat": {
        if (!Array.isArray(input.messages) || input.messages.length === 0 ||
            !input.messages.every((m) => ["system", "user", "assistant"].includes(m?.role) && typeof m.content === "string"))
          throw new RuntimeError("messages must be a non-empty list of {role, content}", "invalid");
        const effort = input.reasoningEffort;
        if (effort !== undefined && !reasoningEfforts.includes(effort))
          throw new RuntimeError(`reasoningEffort must be ${reasoningEfforts.map((e) => JSON.stringify(e)).join(", ")} or absent`, "invalid");
        return chatPromptTokens(model, input.messages, { signal, ...(effort !== undefined ? { reasoningEffort: effort } : {}) }).catch((err: unknown) => {
          // The template failed or tripped a limit: the model's template is at
          // fault for this input, not the runtime; a renderer that cannot run is.
          if (err instanceof ChatTemplateError) throw new RuntimeError(err.message, err.kind === "renderer" ? "failed" : "invalid");
          throw err;
        });
      }
      default:
        throw new RuntimeError("input.kind must be tokens, text or chat", "invalid");
    }
  }

  private emit(event: RuntimeEvent): void {
    for (const l of this.listeners) {
      try {
        l(event);
      } catch {
        // A listener's failure must not break generation or other listeners.
      }
    }
  }
}

function cancelledResult(requestId: RequestId, modelId: ModelId, promptTokens: number[]): GenerationResult {
  return {
    requestId, modelId, text: "", tokens: [], promptTokens, stopReason: "cancel",
    stats: {
      promptTokens: promptTokens.length, reusedPromptTokens: 0, generatedTokens: 0, promptTokensPerSecond: 0,
      decodeTokensPerSecond: 0, ttftMs: 0, queueMs: 0, draftTokens: 0, acceptedDraftTokens: 0, windows: 0, drafter: "none",
    },
  };
}

/** The speculative part of load settings or of a request, checked (one line naming the field). */
function speculativeOf(settings: SpeculativeSettings): SpeculativeSettings {
  const check = checkSpeculative(settings as Readonly<Record<string, unknown>>);
  if (!check.ok) throw new RuntimeError(check.message, "invalid", check.field);
  return check.settings;
}

/** Why a model's sessions cannot draft with MTP, in the runtime's words. */
function noDrafterReason(model: GuildModel): string {
  const d = model.drafter();
  return d.mtp ? "" : d.reason;
}

function describe(id: ModelId, file: string, model: GuildModel, speculative: SpeculativeSettings): LoadedModel {
  const info = model.info();
  const num = (k: string) => (typeof info[k] === "number" ? (info[k] as number) : 0);
  return {
    id,
    path: file,
    name: path.basename(file),
    architecture: typeof info["architecture"] === "string" ? (info["architecture"] as string) : "unknown",
    contextSize: num("n_ctx"),
    layers: num("n_layer"),
    experts: num("n_expert"),
    expertsPerToken: num("n_expert_used"),
    vocabSize: num("n_vocab"),
    weightBytes: num("weight_bytes"),
    threads: num("n_threads"),
    kernels: typeof info["kernels"] === "string" ? (info["kernels"] as string) : "",
    ready: model.ready,
    loadedAt: new Date().toISOString(),
    drafter: model.drafter().mtp ? "mtp" : "none",
    speculative,
  };
}

/** Index of the earliest stop string in text, or -1. */
function firstStop(text: string, stops: readonly string[]): number {
  let best = -1;
  for (const s of stops) {
    const i = text.indexOf(s);
    if (i >= 0 && (best < 0 || i < best)) best = i;
  }
  return best;
}

/** Length of the longest suffix of text that is a proper prefix of a stop string. */
function stopOverlap(text: string, stops: readonly string[]): number {
  let best = 0;
  for (const s of stops)
    for (let n = Math.min(s.length - 1, text.length); n > best; --n)
      if (text.endsWith(s.slice(0, n))) { best = n; break; }
  return best;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
