// A loaded model: weights, tokenizer and chat template.
import { loadNative } from "./native.js";
import type { NativeLoadOptions, NativeModel } from "./native-types.js";
import {
  defaultContextSize,
  defaultKvCacheType,
  defaultThreads,
  type LoadCheckOptions,
  type LoadModelOptions,
  type SessionOptions,
} from "./options.js";
import { GuildSession } from "./session.js";

export interface TokenizeOptions {
  /** Add BOS/EOS as the vocabulary's metadata says. Defaults to false. */
  addSpecial?: boolean;
  /** Treat special-token text (e.g. `<|im_start|>`) as those tokens. Defaults to true. */
  parseSpecial?: boolean;
}

export interface DetokenizeOptions {
  /** Drop a leading BOS / trailing EOS the vocabulary would add. Defaults to false. */
  removeSpecial?: boolean;
  /** Render special tokens as their text. Defaults to true. */
  unparseSpecial?: boolean;
}

/** A load's options as the addon reads them (the same for a load and its pre-flight check). */
function nativeLoadOptions(options: LoadCheckOptions & Pick<LoadModelOptions, "vocabOnly">): NativeLoadOptions {
  return {
    threads: options.threads ?? defaultThreads,
    contextSize: options.contextSize ?? defaultContextSize,
    kvType: options.kvCacheType ?? defaultKvCacheType,
    ...(options.packagesDir !== undefined ? { packagesDir: options.packagesDir } : {}),
    ...(options.gpu !== undefined ? { gpu: options.gpu } : {}),
    ...(options.gpuBudgetGiB !== undefined ? { gpuBudgetBytes: options.gpuBudgetGiB * 2 ** 30 } : {}),
    ...(options.expertsOnCpu !== undefined ? { expertsOnCpu: options.expertsOnCpu } : {}),
    ...(options.gpuPeers !== undefined ? { gpuPeers: options.gpuPeers } : {}),
    ...(options.gpuPeerBudgetGiB !== undefined ? { gpuPeerBudgetBytes: options.gpuPeerBudgetGiB * 2 ** 30 } : {}),
    ...(options.vocabOnly !== undefined ? { vocabOnly: options.vocabOnly } : {}),
  };
}

/** The rejection of an aborted operation: the signal's reason, or an AbortError. */
function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted", "AbortError");
}

export class GuildModel {
  private constructor(
    /** The file it was loaded from. */
    readonly path: string,
    private readonly native: NativeModel,
  ) {}

  /** Loads a .gguf file (or any shard of a split model) off the JS thread. */
  static async load(path: string, options: LoadModelOptions = {}): Promise<GuildModel> {
    const { signal } = options;
    if (signal?.aborted) throw abortReason(signal);
    try {
      const native = await loadNative().loadModel(path, nativeLoadOptions(options), options.onProgress, signal);
      if (signal?.aborted) {
        native.dispose();
        throw abortReason(signal);
      }
      return new GuildModel(path, native);
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      throw err;
    }
  }

  get vocabSize(): number {
    return this.native.vocabSize;
  }

  get trainContextSize(): number {
    return this.native.trainContextSize;
  }

  /** The BOS token id, or null when the vocabulary has none. */
  get bosToken(): number | null {
    const id = this.native.bosToken;
    return id < 0 ? null : id;
  }

  get eosToken(): number | null {
    const id = this.native.eosToken;
    return id < 0 ? null : id;
  }

  get disposed(): boolean {
    return this.native.disposed;
  }

  /** False once a device failure made the model invalid (fail-closed readiness). */
  get ready(): boolean {
    return this.native.ready;
  }

  /** Generations running or waiting on this model. */
  get queueLength(): number {
    return this.native.queueLength;
  }

  /** The load's StartupProfile (schema "guild.startup-profile/1", docs/STARTUP_PROFILE.md). */
  startupProfile(): Record<string, unknown> {
    return JSON.parse(this.native.profile()) as Record<string, unknown>;
  }

  /**
   * Whether this model's sessions can draft speculative windows with its MTP (nextn) block, as the
   * load's StartupProfile says (stage session_state, `drafter`: "mtp: …", else "none (why)"), and, when
   * they cannot, why, in the words the runtime refuses draft "mtp" with.
   */
  drafter(): { mtp: true } | { mtp: false; reason: string } {
    let detail = "";
    try {
      const stages = this.startupProfile()["stages"];
      const stage = Array.isArray(stages) ? (stages as { name?: unknown; detail?: Record<string, unknown> }[]).find((s) => s.name === "session_state") : undefined;
      const d = stage?.detail?.["drafter"];
      if (typeof d === "string") detail = d;
    } catch {
      // no profile: no drafter
    }
    if (detail.startsWith("mtp")) return { mtp: true };
    return {
      mtp: false,
      reason: /CPU executor only/.test(detail)
        ? "MTP drafting runs on the CPU executor only; this model decodes on the GPU"
        : "the model has no MTP (nextn) block to draft with",
    };
  }

  /** The runtime's description of the model (guild_model_info_json). */
  info(): Record<string, unknown> {
    return JSON.parse(this.native.info()) as Record<string, unknown>;
  }

  isEndOfGeneration(token: number): boolean {
    return this.native.isEog(token);
  }

  /** The model's Jinja chat template, or null when the file has none. */
  chatTemplate(): string | null {
    return this.native.chatTemplate();
  }

  tokenize(text: string | Uint8Array, options: TokenizeOptions = {}): number[] {
    return Array.from(this.native.tokenize(text, options.addSpecial ?? false, options.parseSpecial ?? true));
  }

  /** True when tokenize with addSpecial puts a BOS token first. */
  addsBos(): boolean {
    const bos = this.bosToken;
    // a non-empty probe: the text itself can never produce the BOS token
    return bos !== null && this.native.tokenize("a", true, false)[0] === bos;
  }

  /** One token's bytes (special tokens rendered as text unless renderSpecial is false). */
  tokenToPiece(token: number, options: { renderSpecial?: boolean } = {}): Uint8Array {
    return this.native.tokenToPiece(token, options.renderSpecial ?? true);
  }

  /** The bytes of a token sequence; may be invalid UTF-8 where a character is split. */
  detokenize(tokens: readonly number[] | Int32Array, options: DetokenizeOptions = {}): Uint8Array {
    return this.native.detokenize(
      Int32Array.from(tokens),
      options.removeSpecial ?? false,
      options.unparseSpecial ?? true,
    );
  }

  async createSession(options: SessionOptions = {}): Promise<GuildSession> {
    return new GuildSession(await this.native.createSession(options.contextSize ?? 0));
  }

  /** Releases the model (sessions made from it keep it alive until they are disposed). */
  dispose(): void {
    this.native.dispose();
  }
}

/** guild_inspect_json: what the file holds, without loading the weights. */
export async function inspectModel(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await loadNative().inspect(path)) as Record<string, unknown>;
}

/** One session's memory as the runtime computes it (runtime/session_memory.h). */
export interface SessionMemoryEstimate {
  contextSize: number;
  kvBytes: number;
  scratchBytes: number;
  perThreadBytes: number;
  logitsBytes: number;
  historyBytes: number;
  totalBytes: number;
}

/**
 * What a load would take, from the stages the check ran (a field is absent when its stage did not
 * run: the check stopped before it).
 */
export interface LoadEstimate {
  threads?: number;
  contextSize?: number;
  kvCacheType?: string;
  /** Bytes the load binds: dense weights (embeddings, attention, norms, routers, dense FFNs, head) and routed experts. */
  denseBytes?: number;
  expertBytes?: number;
  weightBytes?: number;
  /** Tensors the file leaves misaligned for their type, copied by the load (RAM). */
  alignedCopyBytes?: number;
  /** Where the weights go: "cpu", or on the GPU "gpu" (all of it), "hybrid", "experts on the CPU". */
  placement?: string;
  /** "cuda:N" when a GPU would hold the model. */
  gpuDevice?: string;
  /** The GPU budget arithmetic (budget_gib, dense_kv_scratch_gib, all_on_gpu_gib, mode, …). */
  gpu?: Record<string, unknown>;
  /** One session of the load's context, and what it was held to (available memory less headroom). */
  session?: SessionMemoryEstimate;
  memoryAvailableBytes?: number;
}

/** The runtime's pre-flight check of a load (guild_model_check, docs/C_ABI.md "Pre-flight check"). */
export interface LoadCheck {
  /** True exactly when the load with the same options would succeed (as far as files and memory decide it). */
  ok: boolean;
  /** The guild_status name: "ok", "unsupported", "format", "io", "out_of_memory", "invalid_argument", … */
  status: string;
  /** The load stage whose failure the load would end with (LOAD_STAGES), or null. */
  stage: string | null;
  /** The load's one-line error, word for word, or null. */
  error: string | null;
  estimate: LoadEstimate;
  /** The StartupProfile of the stages the check ran (skipped ones say so in their detail). */
  profile: Record<string, unknown> | null;
}

const numberOr = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
const stringOr = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const objectOr = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;

function sessionOf(v: Record<string, unknown> | undefined): SessionMemoryEstimate | undefined {
  if (!v) return undefined;
  const n = (k: string) => numberOr(v[k]) ?? 0;
  return {
    contextSize: n("n_ctx"), kvBytes: n("kv_bytes"), scratchBytes: n("scratch_bytes"), perThreadBytes: n("per_thread_bytes"),
    logitsBytes: n("logits_bytes"), historyBytes: n("history_bytes"), totalBytes: n("total_bytes"),
  };
}

/** The check's JSON in the app's terms. */
export function parseLoadCheck(json: string): LoadCheck {
  const v = JSON.parse(json) as Record<string, unknown>;
  const e = objectOr(v["estimate"]) ?? {};
  const estimate: LoadEstimate = {};
  const put = <K extends keyof LoadEstimate>(key: K, value: LoadEstimate[K] | undefined) => {
    if (value !== undefined) estimate[key] = value;
  };
  put("threads", numberOr(e["threads"]));
  put("contextSize", numberOr(e["n_ctx"]));
  put("kvCacheType", stringOr(e["kv_type"]));
  put("denseBytes", numberOr(e["dense_bytes"]));
  put("expertBytes", numberOr(e["expert_bytes"]));
  put("weightBytes", numberOr(e["weight_bytes"]));
  put("alignedCopyBytes", numberOr(e["aligned_copy_bytes"]));
  put("placement", stringOr(e["placement"]));
  put("gpuDevice", stringOr(e["gpu_device"]));
  put("gpu", objectOr(e["gpu"]));
  put("session", sessionOf(objectOr(e["session"])));
  put("memoryAvailableBytes", numberOr(e["memory_available_bytes"]));
  return {
    ok: v["ok"] === true,
    status: stringOr(v["status"]) ?? "internal",
    stage: stringOr(v["stage"]) ?? null,
    error: stringOr(v["error"]) ?? null,
    estimate,
    profile: objectOr(v["profile"]) ?? null,
  };
}

/**
 * The runtime's pre-flight check: would GuildModel.load(path, options) succeed, and what would it take?
 * It runs the load's own stages that decide it (kernel packages as a load picks them, the file, the
 * architecture and every tensor type, hyper-parameter and shape checks, the GPU budget, session memory,
 * the tokenizer) and nothing that binds, leases, copies or uploads; off the JS thread. A refusal
 * resolves (ok false, with the load's error and stage); only malformed options reject.
 */
export async function checkModelLoad(path: string, options: LoadCheckOptions = {}): Promise<LoadCheck> {
  return parseLoadCheck(await loadNative().checkModel(path, nativeLoadOptions(options)));
}

/** Which holder (model, session) pins which kernel provider right now. */
export function kernelLeases(): { provider: string; holder: string }[] {
  return JSON.parse(loadNative().leases()) as { provider: string; holder: string }[];
}
