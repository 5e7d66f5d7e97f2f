// The addon's contract, through the wrapper classes and the raw binding:
// streaming, cancellation, errors as rejections, no crash on bad input.
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  comparableSteps,
  fixturesSkipReason,
  greedyMarginQuantized,
  haveFixtures,
  modelPath,
  readExpectedJson,
  type GreedyFile,
} from "../../test/fixtures.js";
import { GuildModel, inspectModel, kernelLeases } from "./model.js";
import { loadNative } from "./native.js";
import type { GuildSession } from "./session.js";

const file = "qwen3moe-a-Q4_0.gguf";

describe("native binding", () => {
  it("loads, and its C ABI version matches the one it was compiled against", () => {
    const native = loadNative();
    expect(native.abiVersion()).toBe(native.compiledAbiVersion);
  });

  it("rejects a missing file with the native message instead of crashing", async () => {
    await expect(GuildModel.load("/nonexistent/model.gguf")).rejects.toThrow(/nonexistent\/model\.gguf/);
    await expect(inspectModel("/nonexistent/model.gguf")).rejects.toThrow(/nonexistent\/model\.gguf/);
  });

  it("throws TypeErrors for malformed arguments", () => {
    const native = loadNative();
    expect(() => native.loadModel(42 as unknown as string)).toThrow(TypeError);
    expect(() => native.loadModel("x.gguf", { threads: -3 })).toThrow(RangeError);
    expect(() => native.loadModel("x.gguf", {}, "nope" as unknown as () => void)).toThrow(TypeError);
    expect(() => native.loadModel("x.gguf", {}, undefined, {} as AbortSignal)).toThrow(TypeError);
    expect(() => new (native as unknown as { Model: new () => unknown }).Model()).toThrow(/loadModel/);
  });
});

describe.skipIf(!haveFixtures)("model and session", () => {
  let model: GuildModel;
  let session: GuildSession;
  const greedy = haveFixtures ? readExpectedJson<GreedyFile>("qwen3moe-a-Q4_0", "greedy.json").prompts[0]! : undefined;

  beforeAll(async () => {
    model = await GuildModel.load(modelPath(file), { threads: 2 });
    session = await model.createSession({ contextSize: 4096 });
  });
  afterAll(() => {
    session?.dispose();
    model?.dispose();
  });

  it("reports progress while loading", async () => {
    const stages: [string, number][] = [];
    const m = await GuildModel.load(modelPath(file), { onProgress: (stage, fraction) => stages.push([stage, fraction]) });
    m.dispose();
    expect(stages.length).toBeGreaterThan(0);
    for (const [stage, fraction] of stages) {
      expect(typeof stage).toBe("string");
      expect(fraction).toBeGreaterThanOrEqual(0);
      expect(fraction).toBeLessThanOrEqual(1);
    }
  });

  it("an aborted load rejects with the signal's reason", async () => {
    const controller = new AbortController();
    const reason = new Error("stop loading");
    const load = GuildModel.load(modelPath(file), { signal: controller.signal, onProgress: () => controller.abort(reason) });
    await expect(load).rejects.toBe(reason);
    const pre = new AbortController();
    pre.abort();
    await expect(GuildModel.load(modelPath(file), { signal: pre.signal })).rejects.toMatchObject({ name: "AbortError" });
  });

  it("exposes vocabulary facts and the model info", () => {
    expect(model.vocabSize).toBe(2560);
    expect(model.eosToken).toBe(2502); // <|im_end|>
    expect(model.isEndOfGeneration(2502)).toBe(true);
    expect(model.isEndOfGeneration(100)).toBe(false);
    expect(model.addsBos()).toBe(false);
    expect(model.info()["architecture"]).toBe("qwen3moe");
  });

  it("streams every token to onToken before generate() resolves, in order", async () => {
    const seen: number[] = [];
    let resolved = false;
    const promise = session.generate(greedy!.prompt_ids, {
      maxNewTokens: 32,
      temperature: 0,
      onToken: ({ id, piece }) => {
        expect(resolved).toBe(false);
        expect(piece).toBeInstanceOf(Uint8Array);
        seen.push(id);
      },
    });
    const result = await promise;
    resolved = true;
    expect(result.stopReason).toBe("length");
    expect(result.tokens).toEqual(seen);
    expect(seen).toHaveLength(32);
    const n = comparableSteps(greedy!.top1_minus_top2_logit, greedyMarginQuantized, 32);
    expect(seen.slice(0, n)).toEqual(greedy!.generated_ids.slice(0, n));
    expect(result.ttftMs).toBeGreaterThan(0);
  });

  it("reuses the cached prefix of the previous call", async () => {
    const first = await session.generate(greedy!.prompt_ids, { maxNewTokens: 4, temperature: 0 });
    const again = await session.generate([...greedy!.prompt_ids, ...first.tokens], { maxNewTokens: 4, temperature: 0 });
    expect(again.promptTokensReused).toBeGreaterThan(0);
  });

  it("an AbortSignal cancels a running generation: stopReason cancel, tokens so far kept", async () => {
    const controller = new AbortController();
    let count = 0;
    const result = await session.generate(greedy!.prompt_ids, {
      maxNewTokens: 2000,
      temperature: 0,
      signal: controller.signal,
      onToken: () => {
        if (++count === 3) controller.abort();
      },
    });
    expect(result.stopReason).toBe("cancel");
    expect(result.tokens.length).toBeGreaterThanOrEqual(3);
    expect(result.tokens.length).toBeLessThan(2000);
    // the next generation on the same session is not affected
    const next = await session.generate(greedy!.prompt_ids, { maxNewTokens: 3, temperature: 0 });
    expect(next.stopReason).toBe("length");
    expect(next.tokens).toHaveLength(3);
  });

  it("a signal aborted before the call resolves at once with stopReason cancel", async () => {
    const controller = new AbortController();
    controller.abort();
    const result = await session.generate(greedy!.prompt_ids, { maxNewTokens: 5, signal: controller.signal });
    expect(result).toMatchObject({ stopReason: "cancel", tokens: [] });
  });

  it("an exception in onToken stops the generation and rejects with it", async () => {
    await expect(
      session.generate(greedy!.prompt_ids, {
        maxNewTokens: 50,
        onToken: () => {
          throw new Error("listener failed");
        },
      }),
    ).rejects.toThrow(/listener failed/);
  });

  it("one operation at a time per session", async () => {
    const first = session.generate(greedy!.prompt_ids, { maxNewTokens: 8, temperature: 0 });
    await expect(session.generate(greedy!.prompt_ids, { maxNewTokens: 1 })).rejects.toThrow(/busy/);
    await expect(session.eval([1, 2, 3])).rejects.toThrow(/busy/);
    expect(() => session.reset()).toThrow(/busy/);
    await first;
    expect(session.busy).toBe(false);
  });

  it("eval returns one row per token (or the last row only)", async () => {
    const s = await model.createSession({ contextSize: 64 });
    const all = await s.eval([1, 2, 3], { allRows: true });
    expect(all).toBeInstanceOf(Float32Array);
    expect(all.length).toBe(3 * model.vocabSize);
    s.reset();
    const last = await s.eval([1, 2, 3]);
    expect(last.length).toBe(model.vocabSize);
    expect(Array.from(last)).toEqual(Array.from(all.subarray(2 * model.vocabSize)));
    s.dispose();
  });

  it("runtime errors reject with the native message and a status code", async () => {
    const s = await model.createSession({ contextSize: 4 });
    await expect(s.eval([1, 2, 3, 4, 5])).rejects.toMatchObject({ message: expect.stringMatching(/context/), code: expect.any(String) });
    s.dispose();
  });

  it("bad token ids are errors, not crashes", async () => {
    expect(() => model.tokenToPiece(-1)).toThrow(RangeError);
    expect(() => model.tokenToPiece(model.vocabSize)).toThrow(RangeError);
    expect(() => model.detokenize([0, 1e6])).toThrow(RangeError);
    await expect(session.generate([model.vocabSize + 5])).rejects.toThrow(RangeError);
    await expect(session.generate([])).rejects.toThrow(TypeError);
    await expect(session.eval([-1])).rejects.toThrow(RangeError);
    await expect(session.generate([1], { topP: 0 })).rejects.toThrow(RangeError);
  });

  it("reports the startup profile, readiness and kernel leases", () => {
    expect(model.startupProfile()["schema"]).toBe("guild.startup-profile/1");
    expect(model.ready).toBe(true);
    expect(model.queueLength).toBe(0);
    expect(Array.isArray(kernelLeases())).toBe(true);
  });

  it("a second session waits its turn and sees its queue position", async () => {
    const other = await model.createSession({ contextSize: 4096 });
    const positions: number[] = [];
    const first = session.generate(greedy!.prompt_ids, { maxNewTokens: 200, temperature: 0 });
    // give the first request time to take the model
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = other.generate(greedy!.prompt_ids, {
      maxNewTokens: 4,
      temperature: 0,
      onQueuePosition: (p) => positions.push(p),
    });
    const [a, b] = await Promise.all([first, second]);
    other.dispose();
    expect(a.stopReason).toBe("length");
    expect(b.tokens).toHaveLength(4);
    expect(positions.at(-1)).toBe(0);
    if (positions.length > 1) {
      expect(positions[0]).toBeGreaterThan(0);
      expect(b.queueMs).toBeGreaterThan(0);
    }
  });

  it("cancelling a queued request resolves it with stopReason cancel", async () => {
    const other = await model.createSession({ contextSize: 4096 });
    const first = session.generate(greedy!.prompt_ids, { maxNewTokens: 300, temperature: 0 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const controller = new AbortController();
    const second = other.generate(greedy!.prompt_ids, {
      maxNewTokens: 4,
      signal: controller.signal,
      onQueuePosition: (p) => {
        if (p > 0) controller.abort();
      },
    });
    setTimeout(() => controller.abort(), 5);
    const b = await second;
    await first;
    other.dispose();
    expect(b.stopReason).toBe("cancel");
  });

  it("a disposed model refuses calls; its sessions keep working", async () => {
    const m = await GuildModel.load(modelPath(file));
    const s = await m.createSession({ contextSize: 64 });
    m.dispose();
    expect(m.disposed).toBe(true);
    expect(() => m.tokenize("x")).toThrow(/disposed/);
    const r = await s.generate([1, 2, 3], { maxNewTokens: 2, temperature: 0 });
    expect(r.tokens).toHaveLength(2);
    s.dispose();
    await expect(s.eval([1])).rejects.toThrow(/disposed/);
  });
});

if (!haveFixtures) describe.skip(`model and session: ${fixturesSkipReason}`, () => {});
