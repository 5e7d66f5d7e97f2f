// Speculative decoding through the OpenAI-compatible API, end to end: ApiServer over a real
// RuntimeHost and the addon, on the reference fixtures. glm4moe-a-F32 has an MTP (nextn) block:
// greedy answers with draft "mtp" equal those with draft "none", and usage.speculative counts the
// drafts; qwen3moe-a-F32 has none: draft "mtp" is a 400 naming `draft`, and the default (auto)
// decodes one token per window. Load settings give a model's default, which a request overrides.
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { LoadedModel, SpeculativeUsage } from "../../shared/runtime-contract.js";
import { fixturesSkipReason, haveFixtures, modelPath, readExpectedJson, type GreedyFile } from "../../test/fixtures.js";
import { ApiServer } from "./api-server.js";
import { RuntimeError, RuntimeHost } from "./runtime-host.js";

interface Completion {
  choices: { text: string; finish_reason: string }[];
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; speculative: SpeculativeUsage };
}

interface ApiError {
  error: { message: string; type: string; param: string | null; code: string | null };
}

const nPredict = 32;

describe.skipIf(!haveFixtures)("the API's speculative decoding on real models", () => {
  const host = new RuntimeHost();
  let glm: LoadedModel;
  let qwen: LoadedModel;
  let server: ApiServer;
  let base: string;
  const prompts = haveFixtures ? readExpectedJson<GreedyFile>("glm4moe-a-F32", "greedy.json").prompts : [];

  beforeAll(async () => {
    glm = await host.loadModel(modelPath("glm4moe-a-F32.gguf"), { threads: 2 });
    qwen = await host.loadModel(modelPath("qwen3moe-a-F32.gguf"), { threads: 2 });
    server = new ApiServer(host, { port: 0 });
    base = (await server.start()).url;
  });
  afterAll(async () => {
    await server?.stop();
    await host.dispose();
  });

  const post = async (route: string, body: Record<string, unknown>) => {
    const res = await fetch(`${base}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as unknown };
  };
  const complete = async (body: Record<string, unknown>): Promise<Completion> => {
    const r = await post("/v1/completions", { model: "glm4moe-a-F32", max_tokens: nPredict, temperature: 0, ...body });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as Completion;
  };

  it("knows which loaded model can draft", () => {
    expect(glm).toMatchObject({ drafter: "mtp", speculative: {} });
    expect(qwen).toMatchObject({ drafter: "none", speculative: {} });
  });

  it.each(prompts.slice(0, 2).map((p) => [p.name, p] as const))("%s: greedy with draft mtp answers what draft none answers, and usage counts the drafts", async (_, prompt) => {
    const plain = await complete({ prompt: prompt.prompt_ids, draft: "none" });
    expect(plain.usage.speculative).toEqual({
      drafter: "none", drafted_tokens: 0, accepted_tokens: 0, windows: nPredict, acceptance_rate: null, tokens_per_window: 1,
    });
    const drafted = await complete({ prompt: prompt.prompt_ids, draft: "mtp", spec_rule: "confidence", spec_max: 4 });
    expect(drafted.choices[0]!.text).toBe(plain.choices[0]!.text);
    expect(drafted.choices[0]!.finish_reason).toBe(plain.choices[0]!.finish_reason);
    expect(drafted.usage.completion_tokens).toBe(nPredict);
    const s = drafted.usage.speculative;
    expect(s.drafter).toBe("mtp");
    expect(s.drafted_tokens).toBeGreaterThan(0);
    expect(s.windows).toBeGreaterThan(0);
    expect(s.windows + s.accepted_tokens).toBe(nPredict);
    expect(s.acceptance_rate).toBeCloseTo(s.accepted_tokens / s.drafted_tokens, 12);
    expect(s.tokens_per_window).toBeCloseTo(nPredict / s.windows, 12);
  });

  it("streams the same text with drafts, with usage.speculative in the last chunk", async () => {
    const prompt = prompts[0]!;
    const whole = await complete({ prompt: prompt.prompt_ids, draft: "mtp", spec_rule: "confidence" });
    const res = await fetch(`${base}/v1/completions`, {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "glm4moe-a-F32", prompt: prompt.prompt_ids, max_tokens: nPredict, temperature: 0, draft: "mtp",
        spec_rule: "confidence", stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.status).toBe(200);
    const events = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { choices: { text: string }[]; usage?: Completion["usage"] });
    expect(chunks.map((c) => c.choices[0]?.text ?? "").join("")).toBe(whole.choices[0]!.text);
    expect(chunks.at(-1)!.usage).toEqual(whole.usage);
  });

  it("drafts by default (auto) on the model with an MTP block, and not at all on the other", async () => {
    const prompt = prompts[0]!;
    const auto = await complete({ prompt: prompt.prompt_ids, spec_rule: "confidence" });
    expect(auto.usage.speculative.drafter).toBe("mtp");
    expect(auto.usage.speculative.drafted_tokens).toBeGreaterThan(0);
    const r = await post("/v1/completions", { model: "qwen3moe-a-F32", prompt: [1, 2, 3], max_tokens: 4, temperature: 0 });
    expect(r.status).toBe(200);
    expect((r.body as Completion).usage.speculative).toMatchObject({ drafter: "none", drafted_tokens: 0, accepted_tokens: 0 });
  });

  it("answers draft mtp on a model without an MTP block with a 400 naming draft, on both routes, streaming or not", async () => {
    const message = 'draft "mtp": the model has no MTP (nextn) block to draft with (use draft "auto" or "none")';
    for (const [route, body] of [
      ["/v1/completions", { prompt: "hello" }],
      ["/v1/chat/completions", { messages: [{ role: "user", content: "hello" }] }],
    ] as const) {
      for (const stream of [false, true]) {
        const r = await post(route, { model: "qwen3moe-a-F32", ...body, draft: "mtp", max_tokens: 4, stream });
        expect(r.status, `${route} stream=${stream}`).toBe(400);
        expect((r.body as ApiError).error).toEqual({ message, type: "invalid_request_error", param: "draft", code: "invalid_value" });
      }
    }
    // the server goes on serving
    expect((await post("/v1/completions", { model: "qwen3moe-a-F32", prompt: "hello", max_tokens: 2 })).status).toBe(200);
  });

  it("takes a model's load settings as its requests' defaults, which a request overrides", async () => {
    const prompt = prompts[0]!;
    const off = await host.loadModel(modelPath("glm4moe-a-F32.gguf"), { threads: 2, draft: "none" });
    const confident = await host.loadModel(modelPath("glm4moe-a-F32.gguf"), { threads: 2, draft: "mtp", specRule: "confidence", specMax: 8 });
    try {
      expect(off.speculative).toEqual({ draft: "none" });
      const generate = (modelId: string, speculative = {}) =>
        host.generate({ modelId, input: { kind: "tokens", tokens: prompt.prompt_ids }, sampling: { temperature: 0, maxTokens: nPredict }, speculative });
      const none = await generate(off.id);
      expect(none.stats).toMatchObject({ drafter: "none", draftTokens: 0, windows: nPredict });
      const overridden = await generate(off.id, { draft: "mtp", specRule: "confidence" });
      expect(overridden.stats.drafter).toBe("mtp");
      expect(overridden.stats.draftTokens).toBeGreaterThan(0);
      expect(overridden.tokens).toEqual(none.tokens);
      const byLoad = await generate(confident.id);
      expect(byLoad.stats.drafter).toBe("mtp");
      expect(byLoad.stats.draftTokens).toBeGreaterThan(overridden.stats.draftTokens);  // windows of 8 rather than 4
      expect(byLoad.tokens).toEqual(none.tokens);
    } finally {
      await host.unloadModel(off.id);
      await host.unloadModel(confident.id);
    }
  });

  it("refuses to load a model without an MTP block with draft mtp, and bad speculative settings, before generating", async () => {
    const refused = await host.loadModel(modelPath("qwen3moe-a-F32.gguf"), { draft: "mtp" }).then(() => null, (e: unknown) => e);
    expect(refused).toBeInstanceOf(RuntimeError);
    expect((refused as RuntimeError).code).toBe("invalid");
    expect((refused as RuntimeError).message).toMatch(/qwen3moe-a-F32\.gguf: draft "mtp": the model has no MTP \(nextn\) block to draft with; load it with draft "auto" or "none"$/);
    expect(host.listModels().map((m) => m.id).sort()).toEqual([glm.id, qwen.id].sort());
    for (const speculative of [{ specMax: 17 }, { specMinP: -1 }, { draft: "MTP" }, { specRule: "fast" }]) {
      const err = await host.generate({ modelId: glm.id, input: { kind: "tokens", tokens: [1, 2] }, speculative: speculative as never }).then(() => null, (e: unknown) => e);
      expect(err, JSON.stringify(speculative)).toBeInstanceOf(RuntimeError);
      expect((err as RuntimeError).code).toBe("invalid");
      expect((err as RuntimeError).field).toBe(Object.keys(speculative)[0]);
    }
  });
});

if (!haveFixtures) describe.skip(`the API's speculative decoding: ${fixturesSkipReason}`, () => {});
