// The native addon's JS surface (native/addon/*.cpp), typed in one place.
// Only the wrapper classes in this folder use it; everything else uses them.

/** Options as the addon reads them; missing fields take the C ABI defaults. */
export interface NativeLoadOptions {
  threads?: number;
  contextSize?: number;
  kvType?: string;
  /** The user's kernel packages directory; absent = $GUILD_PACKAGES_DIR, else the user's data dir. */
  packagesDir?: string;
  /** "auto" | "cpu" | "cuda:N" (builds with CUDA; docs/CUDA.md). */
  gpu?: string;
  /** Device memory the model may use, in bytes. */
  gpuBudgetBytes?: number;
  /** Every routed expert computed by the CPU (dense weights and KV on the GPU). */
  expertsOnCpu?: boolean;
  /** Peer GPUs of a hybrid model, "cuda:N" entries separated by commas ("cuda:1,cuda:2"); "" = none. */
  gpuPeers?: string;
  /** Device memory of each peer GPU's expert cache, in bytes. */
  gpuPeerBudgetBytes?: number;
  /** Open the tokenizer only: no weights, no kernel packages; sessions are refused. */
  vocabOnly?: boolean;
}

export interface NativeGenerateOptions {
  maxNewTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repeatPenalty?: number;
  repeatLastN?: number;
  seed?: number | bigint;
  /** guild_generate_params.draft; absent = "none". */
  draft?: "none" | "auto" | "mtp";
  /** spec_max (S), 1..16; absent = 4. */
  specMax?: number;
  /** spec_min_p, 0..1; absent = 0. */
  specMinP?: number;
  /** spec_by_cost; absent = true. */
  specByCost?: boolean;
  /** Called with the number of requests ahead while this one waits for the model (0 when it starts). */
  onQueue?: (position: number) => void;
}

export type NativeStopReason = "eos" | "length" | "context" | "cancel" | "error";

export interface NativeGenerateResult {
  stopReason: NativeStopReason;
  /** Prompt tokens prefilled (after prefix reuse). */
  nPrompt: number;
  /** Prompt tokens served from the session's cache. */
  nReused: number;
  nGenerated: number;
  promptMs: number;
  decodeMs: number;
  ttftMs: number;
  /** Time spent waiting for the model (one generation at a time per model). */
  queueMs: number;
  /** Speculative draft tokens proposed / accepted. */
  nDrafted: number;
  nAccepted: number;
  /** The verifier's passes of the decode (nGenerated / nWindows tokens per pass). */
  nWindows: number;
  /** True when the model's MTP block drafted the windows. */
  draftedByMtp: boolean;
}

/** Called on the JS thread with the tokens produced since the last call (in order). */
export type NativeTokensCallback = (ids: Int32Array, pieces: Buffer[]) => void;

export interface NativeSession {
  generate(
    prompt: Int32Array,
    options: NativeGenerateOptions,
    onTokens: NativeTokensCallback,
    signal?: AbortSignal,
  ): Promise<NativeGenerateResult>;
  eval(tokens: Int32Array, allRows: boolean): Promise<Float32Array>;
  reset(): void;
  cancel(): void;
  dispose(): void;
  readonly disposed: boolean;
  readonly busy: boolean;
}

export interface NativeModel {
  /** guild_model_info_json */
  info(): string;
  /** guild_model_profile_json: the load's StartupProfile. */
  profile(): string;
  /** Fail-closed readiness: false after a device failure. */
  readonly ready: boolean;
  /** Generations running or waiting on this model. */
  readonly queueLength: number;
  readonly vocabSize: number;
  readonly trainContextSize: number;
  /** -1 when the vocabulary has none. */
  readonly bosToken: number;
  readonly eosToken: number;
  readonly disposed: boolean;
  isEog(token: number): boolean;
  chatTemplate(): string | null;
  tokenize(text: string | Uint8Array, addSpecial: boolean, parseSpecial: boolean): Int32Array;
  tokenToPiece(token: number, renderSpecial: boolean): Buffer;
  detokenize(tokens: Int32Array, removeSpecial: boolean, unparseSpecial: boolean): Buffer;
  createSession(contextSize: number): Promise<NativeSession>;
  dispose(): void;
}

/** Errors from native operations carry the guild_status name when there is one. */
export interface NativeError extends Error {
  code?: string;
}

export interface NativeBinding {
  loadModel(
    path: string,
    options?: NativeLoadOptions,
    onProgress?: (stage: string, fraction: number) => void,
    signal?: AbortSignal,
  ): Promise<NativeModel>;
  /**
   * guild_model_check, off the JS thread: would loadModel(path, options) succeed? Resolves with the
   * JSON verdict ("guild.load-check/1"); rejects only for malformed arguments.
   */
  checkModel(path: string, options?: NativeLoadOptions): Promise<string>;
  /** guild_inspect_json, off the JS thread. */
  inspect(path: string): Promise<string>;
  abiVersion(): number;
  /** guild_leases_json: which holder pins which kernel provider. */
  leases(): string;
  readonly compiledAbiVersion: number;
}
