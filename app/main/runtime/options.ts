// Options of the runtime wrappers, each with its default as a named constant.
import type { DraftMode, SpecRule } from "../../shared/runtime-contract.js";

export { draftModes, specMaxRange, specMinPRange, specRules, type DraftMode, type SpecRule } from "../../shared/runtime-contract.js";

/** KV cache element type. */
export type KvCacheType = "f16" | "f32";

/** Device choice: "auto", "cpu" or a CUDA device "cuda:N". */
export type GpuChoice = "auto" | "cpu" | `cuda:${number}`;

/** True for "auto", "cpu" and "cuda:N" with N a small non-negative integer. */
export function isGpuChoice(v: string): v is GpuChoice {
  return v === "auto" || v === "cpu" || /^cuda:(0|[1-9][0-9]?)$/.test(v);
}

export interface LoadModelOptions {
  /** CPU worker threads. Defaults to {@link defaultThreads} (0 = every physical core). */
  threads?: number;
  /**
   * Default context size of sessions made from this model, in tokens.
   * Defaults to {@link defaultContextSize} (0 = min(the model's training context, 4096)).
   */
  contextSize?: number;
  /** KV cache precision. Defaults to {@link defaultKvCacheType}. */
  kvCacheType?: KvCacheType;
  /**
   * The user's kernel packages directory (docs/PACKAGES.md); the bundled packages are searched too.
   * Absent: $GUILD_PACKAGES_DIR, else the user's data directory.
   */
  packagesDir?: string;
  /**
   * Where to run (docs/CUDA.md): "auto" (a CUDA GPU when the build and machine have one, else the CPU),
   * "cpu", or "cuda:N" (the load fails when that device is unusable). Absent: $GUILD_GPU, else "auto".
   */
  gpu?: GpuChoice;
  /**
   * Device memory the model may use, in GiB. Experts that do not fit stay in RAM and are computed by
   * the CPU expert pool at the same time as the GPU's. Absent: the device's free memory less 1 GiB.
   */
  gpuBudgetGiB?: number;
  /** Compute every routed expert on the CPU (dense weights and KV cache on the GPU). */
  expertsOnCpu?: boolean;
  /**
   * Peer GPUs of a hybrid model (docs/CUDA.md, "Several GPUs"): "cuda:N" entries separated by commas
   * ("cuda:1,cuda:2"), each holding an expert cache of its own. Not with gpu "cpu"; the primary device
   * may not be named. Absent or "": none.
   */
  gpuPeers?: string;
  /** Device memory of each peer GPU's expert cache, in GiB. Absent: each peer's free memory less 1 GiB. */
  gpuPeerBudgetGiB?: number;
  /**
   * Open the file for its tokenizer only (a vocab-only GGUF works too): no weights are bound and no
   * kernel package is needed. tokenize / detokenize / tokenToPiece work; createSession rejects and
   * `ready` is false. Defaults to false.
   */
  vocabOnly?: boolean;
  /** Called on the JS thread as each load stage advances (`fraction` is 0..1 within the load). */
  onProgress?: (stage: string, fraction: number) => void;
  /** Aborts the load; the promise then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** What a pre-flight check is asked: the options of the load it stands for (a check is of a full load). */
export type LoadCheckOptions = Omit<LoadModelOptions, "vocabOnly" | "onProgress" | "signal">;

export const defaultThreads = 0 satisfies NonNullable<LoadModelOptions["threads"]>;
export const defaultContextSize = 0 satisfies NonNullable<LoadModelOptions["contextSize"]>;
export const defaultKvCacheType = "f16" satisfies NonNullable<LoadModelOptions["kvCacheType"]>;

export interface SessionOptions {
  /** Context size in tokens. Defaults to the model's default ({@link LoadModelOptions.contextSize}). */
  contextSize?: number;
}

/** One generated token as it is streamed. */
export interface GeneratedToken {
  id: number;
  /** The token's bytes; a multi-byte character may be split across tokens. */
  piece: Uint8Array;
}

export interface GenerateOptions {
  /**
   * Most tokens to generate. Defaults to {@link defaultMaxNewTokens}: no limit of its
   * own (generation still stops at end-of-generation or when the context is full).
   */
  maxNewTokens?: number;
  /** Sampling temperature; 0 is greedy (ties go to the lowest id). Defaults to {@link defaultTemperature}. */
  temperature?: number;
  /** Keep only the k most likely tokens; 0 is off. Defaults to {@link defaultTopK}. */
  topK?: number;
  /** Nucleus sampling mass; 1 is off. Defaults to {@link defaultTopP}. */
  topP?: number;
  /** Drop tokens below minP x the top probability; 0 is off. Defaults to {@link defaultMinP}. */
  minP?: number;
  /** Penalty for repeating recent tokens; 1 is off. Defaults to {@link defaultRepeatPenalty}. */
  repeatPenalty?: number;
  /** How many recent tokens repeatPenalty looks at. Defaults to {@link defaultRepeatLastN}. */
  repeatLastN?: number;
  /** Sampler seed. Defaults to a random seed per call. */
  seed?: number | bigint;
  /**
   * Speculative decoding (docs/SPECULATIVE.md): "none", "auto" (the model's MTP block drafts when it has
   * one and the session decodes on the CPU, else one token per window) or "mtp" (the same, an error
   * without one). Greedy output is identical either way. Defaults to {@link defaultDraft} (the C ABI's).
   */
  draft?: DraftMode;
  /** Window size S: the last token plus up to S-1 drafts, 1..16. Defaults to {@link defaultSpecMax}. */
  specMax?: number;
  /** A draft whose probability is below this is not proposed, 0..1. Defaults to {@link defaultSpecMinP}. */
  specMinP?: number;
  /**
   * How long a window grows: "cost" (while the head is confident and one more draft raises the expected
   * tokens per ms, by the model's measured window costs) or "confidence" (llama.cpp's rule: while the
   * head is confident). Defaults to {@link defaultSpecRule}.
   */
  specRule?: SpecRule;
  /** Called for every generated token, in order, before the promise resolves. */
  onToken?: (token: GeneratedToken) => void;
  /**
   * Called while the request waits for the model (one generation runs at a time
   * per model) with the number of requests ahead of it, and with 0 when it starts.
   */
  onQueuePosition?: (position: number) => void;
  /** Cancels the generation: the promise resolves with stopReason "cancel". */
  signal?: AbortSignal;
}

export const unlimitedTokens = -1;
export const defaultMaxNewTokens = unlimitedTokens satisfies NonNullable<GenerateOptions["maxNewTokens"]>;
export const defaultTemperature = 0.8 satisfies NonNullable<GenerateOptions["temperature"]>;
export const defaultTopK = 40 satisfies NonNullable<GenerateOptions["topK"]>;
export const defaultTopP = 0.95 satisfies NonNullable<GenerateOptions["topP"]>;
export const defaultMinP = 0.05 satisfies NonNullable<GenerateOptions["minP"]>;
export const defaultRepeatPenalty = 1 satisfies NonNullable<GenerateOptions["repeatPenalty"]>;
export const defaultRepeatLastN = 64 satisfies NonNullable<GenerateOptions["repeatLastN"]>;
export const defaultDraft = "none" satisfies NonNullable<GenerateOptions["draft"]>;
export const defaultSpecMax = 4 satisfies NonNullable<GenerateOptions["specMax"]>;
export const defaultSpecMinP = 0 satisfies NonNullable<GenerateOptions["specMinP"]>;
export const defaultSpecRule = "cost" satisfies NonNullable<GenerateOptions["specRule"]>;

export type StopReason = "eos" | "length" | "context" | "cancel";

export interface GenerateResult {
  stopReason: StopReason;
  /** The generated token ids, in order. */
  tokens: number[];
  /** Prompt tokens that were computed (the rest came from the session's cache). */
  promptTokensComputed: number;
  /** Prompt tokens served from the session's cache. */
  promptTokensReused: number;
  /** Prefill time in ms. */
  promptMs: number;
  /** Time from the first to the last generated token, in ms. */
  decodeMs: number;
  /** Time from the call to the first generated token, in ms. */
  ttftMs: number;
  /** Time spent waiting for the model, in ms. */
  queueMs: number;
  /** Speculative draft tokens proposed, and how many of them were accepted. */
  draftTokens: number;
  acceptedDraftTokens: number;
  /** The verifier's passes of the decode: each yields 1 + the drafts it accepted (tokens / windows per pass). */
  windows: number;
  /** True when the model's MTP block drafted the windows (draft "auto" or "mtp" on a model that has one, on the CPU). */
  draftedByMtp: boolean;
}

export interface EvalOptions {
  /** Return one row of logits per input token instead of only the last. Defaults to {@link defaultEvalAllRows}. */
  allRows?: boolean;
}

export const defaultEvalAllRows = false satisfies NonNullable<EvalOptions["allRows"]>;
