// The runtime's message contract: commands in, events out. RuntimeHost
// (app/main/services/runtime-host.ts) implements it in-process today; because
// every interaction is one of these plain-JSON messages, the host can move to
// a separate process later without changing its callers. Imported by main,
// the renderer (through the IPC/HTTP contract) and the API server.

export const RUNTIME_PROTOCOL_VERSION = 1;

export type ModelId = string;
export type SessionId = string;
export type RequestId = string;
export type LoadId = string;

/** The 14 load stages, in order (docs/STARTUP_PROFILE.md). */
export const LOAD_STAGES = [
  "device_policy", "packages", "container", "runner", "execution_state", "expert_pool", "stream_and_lease",
  "gexec", "dense_weights", "expert_tiers", "calibration", "ram_complement", "session_state", "tokenizer",
] as const;
export type LoadStage = (typeof LOAD_STAGES)[number];

/**
 * Speculative decoding (docs/SPECULATIVE.md): who drafts the windows. "auto": the model's MTP (nextn)
 * block when it has one and the session decodes on the CPU, else one token per window; "mtp": the same,
 * refused for a model without one; "none": one token per window. Greedy output is identical either way.
 */
export const draftModes = ["none", "auto", "mtp"] as const;
export type DraftMode = (typeof draftModes)[number];

/**
 * How long a window grows: "cost" (the runtime's default: while the MTP head is confident and one more
 * draft raises the expected tokens per ms by the model's measured window costs) or "confidence"
 * (llama.cpp's rule: while the head's top-1 probability stays at or above specMinP).
 */
export const specRules = ["cost", "confidence"] as const;
export type SpecRule = (typeof specRules)[number];

/** Window size S (the last token plus up to S-1 drafts) and the drafts' probability floor, as the C ABI bounds them. */
export const specMaxRange = { min: 1, max: 16 } as const;
export const specMinPRange = { min: 0, max: 1 } as const;

/** The draft mode the app, the API and `guild run` use when none is chosen (the C ABI's own default is "none"). */
export const defaultAppDraft = "auto" satisfies DraftMode;

export interface SpeculativeSettings {
  /** Absent: the model's load setting, else {@link defaultAppDraft}. */
  draft?: DraftMode;
  /** S, 1..16; absent: the runtime's default (4). */
  specMax?: number;
  /** 0..1; absent: the runtime's default (0). */
  specMinP?: number;
  /** Absent: the runtime's default ("cost"). */
  specRule?: SpecRule;
}

/** The fields of {@link SpeculativeSettings}, for schemas and field-by-field checks. */
export const speculativeFields = ["draft", "specMax", "specMinP", "specRule"] as const;

/**
 * The one check of speculative settings (the main process's load settings and generation requests;
 * the API and the CLI word their own messages from the same ranges). Absent fields stay absent.
 */
export function checkSpeculative(s: Readonly<Record<string, unknown>>):
  | { ok: true; settings: SpeculativeSettings }
  | { ok: false; field: (typeof speculativeFields)[number]; message: string } {
  const out: SpeculativeSettings = {};
  const { draft, specMax, specMinP, specRule } = s;
  if (draft !== undefined) {
    if (typeof draft !== "string" || !(draftModes as readonly string[]).includes(draft))
      return { ok: false, field: "draft", message: 'draft must be "none", "auto" or "mtp"' };
    out.draft = draft as DraftMode;
  }
  if (specMax !== undefined) {
    if (typeof specMax !== "number" || !Number.isInteger(specMax) || specMax < specMaxRange.min || specMax > specMaxRange.max)
      return { ok: false, field: "specMax", message: `specMax must be a whole number from ${specMaxRange.min} to ${specMaxRange.max}` };
    out.specMax = specMax;
  }
  if (specMinP !== undefined) {
    if (typeof specMinP !== "number" || !(specMinP >= specMinPRange.min && specMinP <= specMinPRange.max))
      return { ok: false, field: "specMinP", message: `specMinP must be a number from ${specMinPRange.min} to ${specMinPRange.max}` };
    out.specMinP = specMinP;
  }
  if (specRule !== undefined) {
    if (typeof specRule !== "string" || !(specRules as readonly string[]).includes(specRule))
      return { ok: false, field: "specRule", message: 'specRule must be "cost" or "confidence"' };
    out.specRule = specRule as SpecRule;
  }
  return { ok: true, settings: out };
}

/**
 * Per-load settings. The kernel packages directory is not one of them: it is the
 * RuntimeHost's (RuntimeHostOptions.packagesDir, `--packages-dir`), because which
 * libraries a load opens is the machine owner's choice, not a caller's.
 */
export interface ModelLoadSettings extends SpeculativeSettings {
  /** CPU worker threads; 0 or absent = every physical core. */
  threads?: number;
  /** Default context of the model's sessions in tokens; 0 or absent = min(training context, 4096). */
  contextSize?: number;
  kvCacheType?: "f16" | "f32";
  /** "auto" (a CUDA GPU when there is one), "cpu", or "cuda:N" (docs/CUDA.md). */
  gpu?: "auto" | "cpu" | `cuda:${number}`;
  /** Device memory the model may use, in GiB; experts beyond it are computed by the CPU. */
  gpuBudgetGiB?: number;
  /** Every routed expert on the CPU (dense weights and KV on the GPU). */
  expertsOnCpu?: boolean;
  /**
   * Peer GPUs of a hybrid model, "cuda:N" entries separated by commas (docs/CUDA.md, "Several GPUs");
   * "" = none. Not with gpu "cpu"; the primary device may not be named (ModelManager checks both).
   */
  gpuPeers?: string;
  /** Device memory of each peer GPU's expert cache, in GiB (needs gpuPeers); absent = its free memory less 1 GiB. */
  gpuPeerBudgetGiB?: number;
  // draft, specMax, specMinP, specRule (SpeculativeSettings): not load options of the runtime but the
  // defaults of every generation with the model (a request's own `speculative` overrides them).
}

export interface LoadedModel {
  id: ModelId;
  path: string;
  name: string;
  architecture: string;
  contextSize: number;
  layers: number;
  experts: number;
  expertsPerToken: number;
  vocabSize: number;
  weightBytes: number;
  threads: number;
  kernels: string;
  ready: boolean;
  loadedAt: string;  // ISO time
  /**
   * Who can draft speculative windows for its sessions: "mtp" when the model has an MTP (nextn) block
   * and decodes on the CPU (the startup profile's session_state says so), else "none".
   */
  drafter: "mtp" | "none";
  /** The generations' speculative settings from the load (absent fields: the defaults). */
  speculative: SpeculativeSettings;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** How hard a reasoning model thinks: the chat template's `reasoning_effort` (gpt-oss's harmony templates read it). */
export const reasoningEfforts = ["low", "medium", "high"] as const;
export type ReasoningEffort = (typeof reasoningEfforts)[number];

export type GenerationInput =
  | { kind: "tokens"; tokens: number[] }                 // fed exactly as given
  | { kind: "text"; text: string }                      // tokenized by the model's rules (BOS as its metadata says)
  // the model's chat template, generation prompt added; reasoningEffort absent = the template's own default
  | { kind: "chat"; messages: ChatMessage[]; reasoningEffort?: ReasoningEffort };

export interface SamplingSettings {
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repeatPenalty?: number;
  seed?: number;
  /** Most tokens to generate; absent = until end of generation or a full context. */
  maxTokens?: number;
}

export interface GenerationRequest {
  modelId: ModelId;
  /** Reuse a session (its KV cache: a prompt that extends its history is not re-read). Absent = a fresh one. */
  sessionId?: SessionId;
  input: GenerationInput;
  sampling?: SamplingSettings;
  /** Stop when the generated text contains one of these; it is not included in the result. */
  stop?: string[];
  /** Speculative decoding for this request; each absent field: the model's load setting, else the default. */
  speculative?: SpeculativeSettings;
}

export type StopReason = "eos" | "length" | "context" | "cancel" | "stop";

export interface GenerationStats {
  promptTokens: number;
  reusedPromptTokens: number;
  generatedTokens: number;
  promptTokensPerSecond: number;
  decodeTokensPerSecond: number;
  ttftMs: number;
  queueMs: number;
  /** Speculative draft tokens proposed, and of them accepted. */
  draftTokens: number;
  acceptedDraftTokens: number;
  /** The verifier's passes of the decode (generated tokens / windows = tokens per pass). */
  windows: number;
  /** "mtp" when the model's MTP block drafted the windows, else "none" (one token per window). */
  drafter: "mtp" | "none";
}

/** Accepted / drafted, or null when nothing was drafted. */
export function acceptanceRate(s: Pick<GenerationStats, "draftTokens" | "acceptedDraftTokens">): number | null {
  return s.draftTokens > 0 ? s.acceptedDraftTokens / s.draftTokens : null;
}

/** Generated tokens per verifier pass, or null when there was none. */
export function tokensPerWindow(s: Pick<GenerationStats, "generatedTokens" | "windows">): number | null {
  return s.windows > 0 ? s.generatedTokens / s.windows : null;
}

/** How a generation drafted, as the API's `usage.speculative` and `guild run --json`'s `stats.speculative` say it. */
export interface SpeculativeUsage {
  drafter: "mtp" | "none";
  drafted_tokens: number;
  accepted_tokens: number;
  windows: number;
  /** accepted / drafted; null when nothing was drafted. */
  acceptance_rate: number | null;
  /** generated tokens / windows; null without a window. */
  tokens_per_window: number | null;
}

export function speculativeUsage(s: Pick<GenerationStats, "drafter" | "draftTokens" | "acceptedDraftTokens" | "windows" | "generatedTokens">): SpeculativeUsage {
  return {
    drafter: s.drafter,
    drafted_tokens: s.draftTokens,
    accepted_tokens: s.acceptedDraftTokens,
    windows: s.windows,
    acceptance_rate: acceptanceRate(s),
    tokens_per_window: tokensPerWindow(s),
  };
}

export interface GenerationResult {
  requestId: RequestId;
  modelId: ModelId;
  text: string;
  tokens: number[];
  promptTokens: number[];
  stopReason: StopReason;
  stats: GenerationStats;
}

export interface QueueState {
  modelId: ModelId;
  /** Requests running or waiting on the model. */
  length: number;
  running: RequestId | null;
  waiting: RequestId[];
}

export type RuntimeCommand =
  | { type: "loadModel"; path: string; settings?: ModelLoadSettings; loadId?: LoadId }
  | { type: "cancelLoad"; loadId: LoadId }
  | { type: "unloadModel"; modelId: ModelId }
  | { type: "listModels" }
  | { type: "createSession"; modelId: ModelId }
  | { type: "closeSession"; sessionId: SessionId }
  | { type: "generate"; request: GenerationRequest; requestId?: RequestId }
  | { type: "cancel"; requestId: RequestId }
  | { type: "profile"; modelId: ModelId }
  | { type: "queueState"; modelId: ModelId };

/** What each command answers. */
export interface RuntimeReplies {
  loadModel: LoadedModel;
  cancelLoad: { cancelled: boolean };
  unloadModel: { unloaded: boolean };
  listModels: LoadedModel[];
  createSession: { sessionId: SessionId };
  closeSession: { closed: boolean };
  generate: GenerationResult;
  cancel: { cancelled: boolean };
  profile: StartupProfileJson;
  queueState: QueueState;
}
export type RuntimeReply<C extends RuntimeCommand> = RuntimeReplies[C["type"]];

export type RuntimeEvent =
  | { type: "loadProgress"; loadId: LoadId; path: string; stage: string; fraction: number }
  | { type: "modelLoaded"; loadId: LoadId; model: LoadedModel }
  | { type: "modelUnloaded"; modelId: ModelId }
  | { type: "queued"; requestId: RequestId; modelId: ModelId; position: number }
  | { type: "started"; requestId: RequestId; modelId: ModelId }
  | { type: "token"; requestId: RequestId; id: number; text: string }
  | { type: "done"; result: GenerationResult }
  | { type: "error"; requestId?: RequestId; loadId?: LoadId; message: string };

/** guild.startup-profile/1 (docs/STARTUP_PROFILE.md). */
export interface StartupProfileJson {
  schema: "guild.startup-profile/1";
  model: Record<string, unknown>;
  machine: Record<string, unknown>;
  stages: {
    name: string;
    start_ms: number;
    end_ms: number;
    duration_ms: number;
    bytes: number;
    detail: Record<string, unknown>;
  }[];
  fallbacks: { stage: string; reason: string }[];
  placement: { layers?: PlacementLayerJson[]; /** "cuda:N" when the experts are placed on a GPU. */ device?: string } & Record<string, unknown>;
  total_ms: number;
}

/** One layer of `placement.layers` (stage calibration); the hybrid fields only with a GPU that cannot hold every expert. */
export interface PlacementLayerJson {
  gpu_experts: number;
  cpu_experts: number;
  dense?: boolean;
  /** Expert ids cached on the GPU. */
  cached?: number[];
  cpu_us_per_expert?: number;
  copy_us_per_expert?: number;
  cold_expert?: string;
}

/**
 * The one set of rules for a peer GPU list (docs/CUDA.md, "Several GPUs"), shared by the CLI, the
 * main process and the Models page, which word the problems their own way: comma-separated
 * `cuda:N` entries (spaces trimmed; "" = none), none named twice, not with `gpu` "cpu", and not the
 * primary device `gpu` itself. On success `peers` is the normalized list ("cuda:1,cuda:2" → 2 entries).
 */
export type GpuPeersCheck =
  | { ok: true; peers: string[] }
  | { ok: false; problem: "malformed" }
  | { ok: false; problem: "twice" | "primary"; entry: string }
  | { ok: false; problem: "needs_gpu" };

export function checkGpuPeers(text: string, gpu: string | undefined): GpuPeersCheck {
  const peers = text.trim() === "" ? [] : text.split(",").map((p) => p.trim());
  if (!peers.every((p) => /^cuda:(0|[1-9][0-9]?)$/.test(p))) return { ok: false, problem: "malformed" };
  const twice = peers.find((p, i) => peers.indexOf(p) !== i);
  if (twice !== undefined) return { ok: false, problem: "twice", entry: twice };
  if (peers.length > 0 && gpu === "cpu") return { ok: false, problem: "needs_gpu" };
  if (gpu !== undefined && peers.includes(gpu)) return { ok: false, problem: "primary", entry: gpu };
  return { ok: true, peers };
}
