// A conversation's state on the runtime: KV cache and token history.
import { randomInt } from "node:crypto";

import type { NativeSession } from "./native-types.js";
import {
  defaultDraft,
  defaultEvalAllRows,
  defaultMaxNewTokens,
  defaultMinP,
  defaultRepeatLastN,
  defaultRepeatPenalty,
  defaultSpecMax,
  defaultSpecMinP,
  defaultSpecRule,
  defaultTemperature,
  defaultTopK,
  defaultTopP,
  type EvalOptions,
  type GenerateOptions,
  type GenerateResult,
} from "./options.js";

const int32Max = 2 ** 31 - 1;

export class GuildSession {
  /** @internal made by {@link GuildModel.createSession} */
  constructor(private readonly native: NativeSession) {}

  /** True while a generate() or eval() runs (one at a time per session). */
  get busy(): boolean {
    return this.native.busy;
  }

  get disposed(): boolean {
    return this.native.disposed;
  }

  /**
   * Generates a continuation of `prompt` (the whole conversation so far: the
   * runtime reuses the longest prefix it already holds). Tokens are streamed to
   * `options.onToken` as they are produced; all of them have been delivered when
   * the promise resolves. Cancelling through `options.signal` resolves with
   * stopReason "cancel"; runtime errors reject with the native message.
   */
  async generate(prompt: readonly number[] | Int32Array, options: GenerateOptions = {}): Promise<GenerateResult> {
    const maxNewTokens = options.maxNewTokens ?? defaultMaxNewTokens;
    const tokens: number[] = [];
    const onToken = options.onToken;
    // Queue positions arrive through their own thread-safe channel, which may
    // still hold the final "0" when the generation settles: report the start
    // here if the runtime says the request ran (it prefilled its prompt).
    const onQueuePosition = options.onQueuePosition;
    let lastPosition: number | undefined;
    const onQueue = onQueuePosition && ((position: number) => {
      lastPosition = position;
      onQueuePosition(position);
    });
    // The signal is not handed to the addon: its abort listener keeps the
    // native session (and so its kernel-package lease) alive until the
    // listener is garbage-collected, long after dispose(). Cancelling through
    // session.cancel() is the same operation and holds nothing.
    const signal = options.signal;
    if (signal?.aborted) return cancelledBeforeStart();
    const onAbort = () => this.native.cancel();
    const pending = this.native.generate(
      Int32Array.from(prompt),
      {
        maxNewTokens: maxNewTokens < 0 ? int32Max : maxNewTokens,
        temperature: options.temperature ?? defaultTemperature,
        topK: options.topK ?? defaultTopK,
        topP: options.topP ?? defaultTopP,
        minP: options.minP ?? defaultMinP,
        repeatPenalty: options.repeatPenalty ?? defaultRepeatPenalty,
        repeatLastN: options.repeatLastN ?? defaultRepeatLastN,
        seed: options.seed ?? randomInt(2 ** 32),
        draft: options.draft ?? defaultDraft,
        specMax: options.specMax ?? defaultSpecMax,
        specMinP: options.specMinP ?? defaultSpecMinP,
        specByCost: (options.specRule ?? defaultSpecRule) === "cost",
        ...(onQueue !== undefined && { onQueue }),
      },
      (ids, pieces) => {
        for (let i = 0; i < ids.length; i++) {
          const id = ids[i]!;
          tokens.push(id);
          onToken?.({ id, piece: pieces[i]! });
        }
      },
    );
    signal?.addEventListener("abort", onAbort, { once: true });
    let result: Awaited<typeof pending>;
    try {
      result = await pending;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    if (result.stopReason === "error") throw new Error("generation failed");
    if (onQueuePosition && lastPosition !== 0 && result.nPrompt > 0) onQueuePosition(0);
    return {
      stopReason: result.stopReason,
      tokens,
      promptTokensComputed: result.nPrompt,
      promptTokensReused: result.nReused,
      promptMs: result.promptMs,
      decodeMs: result.decodeMs,
      ttftMs: result.ttftMs,
      queueMs: result.queueMs,
      draftTokens: result.nDrafted,
      acceptedDraftTokens: result.nAccepted,
      windows: result.nWindows,
      draftedByMtp: result.draftedByMtp,
    };
  }

  /**
   * Appends `tokens` to the session (prefill) and returns logits: one row of
   * vocabSize floats per token with allRows, else only the last row.
   */
  async eval(tokens: readonly number[] | Int32Array, options: EvalOptions = {}): Promise<Float32Array> {
    return await this.native.eval(Int32Array.from(tokens), options.allRows ?? defaultEvalAllRows);
  }

  /** Clears the KV cache and history. */
  reset(): void {
    this.native.reset();
  }

  /** Cancels a running generation, if any. */
  cancel(): void {
    this.native.cancel();
  }

  /** Frees the session (after a running operation ends). */
  dispose(): void {
    this.native.dispose();
  }
}

/** What the runtime answers for a generation aborted before it started: nothing ran. */
function cancelledBeforeStart(): GenerateResult {
  return {
    stopReason: "cancel", tokens: [], promptTokensComputed: 0, promptTokensReused: 0, promptMs: 0, decodeMs: 0,
    ttftMs: 0, queueMs: 0, draftTokens: 0, acceptedDraftTokens: 0, windows: 0, draftedByMtp: false,
  };
}
