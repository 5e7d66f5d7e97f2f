// One generation streamed to stdout: plain text as it is produced, or JSON Lines
// events (`token` per token, then `done`).
import { speculativeUsage, type SpeculativeUsage } from "../../shared/runtime-contract.js";
import type { GuildSession } from "../runtime/session.js";
import type { GenerateOptions, GenerateResult } from "../runtime/options.js";
import type { Output } from "./output.js";

export interface StreamedGeneration {
  result: GenerateResult;
  /** The generated text (pieces concatenated, decoded as UTF-8). */
  text: string;
}

/** The `done` event of `guild run --json`. */
export interface DoneEvent {
  event: "done";
  prompt_tokens: number[];
  tokens: number[];
  text: string;
  stop_reason: GenerateResult["stopReason"];
  stats: {
    prompt_tokens_per_s: number | null;
    decode_tokens_per_s: number | null;
    ttft_ms: number | null;
    /** Speculative decoding: who drafted, drafted / accepted tokens, windows, acceptance rate, tokens per window. */
    speculative: SpeculativeUsage;
  };
}

function perSecond(count: number, ms: number): number | null {
  return count > 0 && ms > 0 ? count / (ms / 1000) : null;
}

export function doneEvent(prompt: readonly number[], generation: StreamedGeneration): DoneEvent {
  const { result } = generation;
  return {
    event: "done",
    prompt_tokens: [...prompt],
    tokens: result.tokens,
    text: generation.text,
    stop_reason: result.stopReason,
    stats: {
      prompt_tokens_per_s: perSecond(result.promptTokensComputed, result.promptMs),
      // decodeMs runs from the first to the last token: n - 1 intervals
      decode_tokens_per_s: perSecond(result.tokens.length - 1, result.decodeMs),
      ttft_ms: result.tokens.length > 0 ? result.ttftMs : null,
      speculative: speculativeUsage({
        drafter: result.draftedByMtp ? "mtp" : "none",
        draftTokens: result.draftTokens,
        acceptedDraftTokens: result.acceptedDraftTokens,
        windows: result.windows,
        generatedTokens: result.tokens.length,
      }),
    },
  };
}

export async function streamGeneration(
  session: GuildSession,
  prompt: readonly number[],
  options: Omit<GenerateOptions, "onToken">,
  out: Output,
  json: boolean,
): Promise<StreamedGeneration> {
  // A token may end in the middle of a UTF-8 character: decode as a stream.
  const decoder = new TextDecoder("utf-8", { fatal: false });
  let text = "";
  const result = await session.generate(prompt, {
    ...options,
    onToken: ({ id, piece }) => {
      const chunk = decoder.decode(piece, { stream: true });
      text += chunk;
      if (json) out.line(JSON.stringify({ event: "token", id, text: chunk }));
      else if (chunk) out.write(chunk);
    },
  });
  const tail = decoder.decode();
  text += tail;
  if (!json && tail) out.write(tail);
  return { result, text };
}
