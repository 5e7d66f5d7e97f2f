// A loaded model: weights, tokenizer and chat template.
import { loadNative } from "./native.js";
import type { NativeModel } from "./native-types.js";
import {
  defaultContextSize,
  defaultKvCacheType,
  defaultThreads,
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
      const native = await loadNative().loadModel(
        path,
        {
          threads: options.threads ?? defaultThreads,
          contextSize: options.contextSize ?? defaultContextSize,
          kvType: options.kvCacheType ?? defaultKvCacheType,
          ...(options.packagesDir !== undefined ? { packagesDir: options.packagesDir } : {}),
          ...(options.gpu !== undefined ? { gpu: options.gpu } : {}),
          ...(options.gpuBudgetGiB !== undefined ? { gpuBudgetBytes: options.gpuBudgetGiB * 2 ** 30 } : {}),
          ...(options.expertsOnCpu !== undefined ? { expertsOnCpu: options.expertsOnCpu } : {}),
          ...(options.gpuPeers !== undefined ? { gpuPeers: options.gpuPeers } : {}),
          ...(options.gpuPeerBudgetGiB !== undefined ? { gpuPeerBudgetBytes: options.gpuPeerBudgetGiB * 2 ** 30 } : {}),
        },
        options.onProgress,
        signal,
      );
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

/** Which holder (model, session) pins which kernel provider right now. */
export function kernelLeases(): { provider: string; holder: string }[] {
  return JSON.parse(loadNative().leases()) as { provider: string; holder: string }[];
}
