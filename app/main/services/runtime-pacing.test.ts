// RuntimeHost's test-only pacing (RuntimeHostOptions.testPacing), which the
// e2e specs use to stop a reply midway however fast the model is: the same
// tokens as an unpaced run, delivered step by step with a pause between, and
// a cancel during a pause ends the reply with the tokens so far.
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { GenerationRequest, LoadedModel } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import { RuntimeHost } from "./runtime-host.js";

describe("RuntimeHost test pacing", () => {
  const delayMs = 40;
  const paced = new RuntimeHost({ testPacing: { tokensPerStep: 1, delayMs } });
  const plain = new RuntimeHost();
  let pacedModel: LoadedModel;
  let plainModel: LoadedModel;
  const request = (modelId: string, maxTokens: number): GenerationRequest => ({
    modelId, input: { kind: "chat", messages: [{ role: "user", content: "What does river mean?" }] }, sampling: { temperature: 0, maxTokens },
  });

  beforeAll(async () => {
    pacedModel = await paced.loadModel(embeddedModelPath(), { threads: 2 });
    plainModel = await plain.loadModel(embeddedModelPath(), { threads: 2 });
  });
  afterAll(async () => {
    await paced.dispose();
    await plain.dispose();
  });

  it("generates the unpaced tokens, one step at a time with a pause between", async () => {
    const expected = await plain.generate(request(plainModel.id, 12));
    const at: number[] = [];
    const texts: string[] = [];
    const off = paced.subscribe((e) => { if (e.type === "token" && e.requestId === "p1") { at.push(performance.now()); texts.push(e.text); } });
    const r = await paced.generate(request(pacedModel.id, 12), "p1");
    off();
    expect(r.tokens).toEqual(expected.tokens);
    expect(r.text).toBe(expected.text);
    expect(r.stopReason).toBe(expected.stopReason);
    expect(texts.join("")).toBe(r.text);
    expect(r.tokens.length).toBeGreaterThan(3);
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(delayMs * 0.8);
    // Tokens/s is as delivered, pauses included.
    expect(r.stats.decodeTokensPerSecond).toBeLessThan(1000 / (delayMs * 0.8));
  });

  it("a cancel between steps ends the reply with the tokens so far", async () => {
    let seen = 0;
    const off = paced.subscribe((e) => { if (e.type === "token" && e.requestId === "p2" && ++seen === 3) paced.cancel("p2"); });
    const r = await paced.generate(request(pacedModel.id, 100), "p2");
    off();
    expect(r.stopReason).toBe("cancel");
    expect(r.tokens).toHaveLength(3);
    expect(paced.queueState(pacedModel.id)).toMatchObject({ running: null, waiting: [] });
  });
});
