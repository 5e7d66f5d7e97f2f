// Test-only pacing: generates like GuildSession.generate, but a few tokens at
// a time with a pause between the steps, so that a test can act on a reply
// while it is still running (the demo model answers in tens of milliseconds).
// Each step continues the same session (its cached prefix is reused), so the
// tokens, the stop reasons and cancellation are the runtime's own. Nothing in
// the app, the CLI or `guild serve` enables it (RuntimeHostOptions.testPacing).
import type { GenerateOptions, GenerateResult } from "./options.js";
import type { GuildSession } from "./session.js";

export interface TokenPacing {
  /** Tokens generated per step (≥ 1). */
  tokensPerStep: number;
  /** Pause between steps, in ms. */
  delayMs: number;
}

export async function pacedGenerate(
  session: GuildSession, prompt: readonly number[], options: GenerateOptions, pacing: TokenPacing,
): Promise<GenerateResult> {
  const step = Math.max(1, Math.floor(pacing.tokensPerStep));
  const limit = options.maxNewTokens !== undefined && options.maxNewTokens >= 0 ? options.maxNewTokens : Infinity;
  const { signal } = options;
  const tokens: number[] = [];
  let first: GenerateResult | undefined;
  // Each step is a generation of its own: its drafts and windows add up.
  const drafts = { draftTokens: 0, acceptedDraftTokens: 0, windows: 0, draftedByMtp: false };
  // Decode time as delivered (from the first token to the last, pauses included), so tokens/s is what a user would see.
  let firstTokenAt: number | undefined;
  let lastTokenAt = 0;
  const onToken: GenerateOptions["onToken"] = (token) => {
    lastTokenAt = performance.now();
    firstTokenAt ??= lastTokenAt;
    options.onToken?.(token);
  };
  for (;;) {
    const want = Math.min(step, limit - tokens.length);
    const r = await session.generate([...prompt, ...tokens], { ...options, maxNewTokens: want, onToken });
    tokens.push(...r.tokens);
    first ??= r;
    drafts.draftTokens += r.draftTokens;
    drafts.acceptedDraftTokens += r.acceptedDraftTokens;
    drafts.windows += r.windows;
    drafts.draftedByMtp ||= r.draftedByMtp;
    const done = r.stopReason !== "length" || tokens.length >= limit;
    const stopReason = done ? r.stopReason : (await pause(pacing.delayMs, signal)) ? null : "cancel";
    if (stopReason !== null) return { ...first, ...drafts, stopReason, tokens, decodeMs: firstTokenAt === undefined ? 0 : lastTokenAt - firstTokenAt };
  }
}

/** Waits `ms`; false when the signal aborts first. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
